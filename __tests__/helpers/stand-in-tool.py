#!/usr/bin/env python3
# A stand-in for `kubectl`, `docker` and `podman` (copied under those names into a
# directory put first on PATH by __tests__/launchers/recipes.test.js). It appends its argv
# to calls.jsonl beside itself, then does what the real tool does for the parts the
# recipes of docs/launchers.md use:
#
# - `exec`: the real tool runs the command in a pod or container; this one execs it here,
#   after dropping the tool's own options. Without `-i` the command gets no stdin (as
#   with the real tools); `-t` fails; kubectl without `--` reads the command's options as
#   its own (`-u` is then an unknown flag, as it is to kubectl).
# - kubectl `create -f -` of a SandboxClaim, `wait --for=condition=Ready`, `get -o
#   jsonpath=...` of a claim or a sandbox, `delete`: the agent-sandbox claim flow, with
#   each claim bound at once to a sandbox and a pod of its own (named apart from the claim,
#   as a warm pool's are), kept as JSON files in claims/.
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.basename(sys.argv[0])
ARGS = sys.argv[1:]
CLAIMS_DIR = os.path.join(HERE, "claims")
CLAIMS = "sandboxclaims.extensions.agents.x-k8s.io"
SANDBOXES = "sandboxes.agents.x-k8s.io"

# kubectl's, docker's and podman's options that take a value (as the recipes use them).
VALUED = {
    "kubectl": {"-n", "--namespace", "-c", "--container", "-o", "--output", "-f", "--filename", "--timeout", "--for"},
    "docker": {"-w", "--workdir", "-u", "--user", "-e", "--env"},
    "podman": {"-w", "--workdir", "-u", "--user", "-e", "--env"},
}


def record():
    line = json.dumps([TOOL] + ARGS) + "\n"
    fd = os.open(os.path.join(HERE, "calls.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def fail(message, code=1):
    sys.stderr.write(message + "\n")
    sys.exit(code)


def parse(args, stop_at_first_positional):
    """(flags {name: value or True}, positionals, rest after `--` or None)."""
    flags, positionals, i = {}, [], 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return flags, positionals, args[i + 1:]
        if a.startswith("-") and len(a) > 1:
            name, eq, value = a.partition("=")
            if eq:
                flags[name] = value
            elif name in VALUED[TOOL]:
                if i + 1 >= len(args):
                    fail("error: flag needs an argument: %s" % name)
                flags[name] = args[i + 1]
                i += 1
            elif TOOL == "kubectl" and name not in ("-i", "--stdin", "-t", "--tty", "--ignore-not-found"):
                fail("error: unknown shorthand flag: %r in %s" % (name.lstrip("-")[:1], name))
            else:
                flags[name] = True
        else:
            positionals.append(a)
            if stop_at_first_positional:
                return flags, positionals, args[i + 1:]
        i += 1
    return flags, positionals, None


def run_here(flags, command):
    if not command:
        fail("error: no command to run")
    if "-t" in flags or "--tty" in flags:
        # The real tools differ (docker refuses, podman puts a terminal on the pipe that
        # echoes the runner back, kubectl drops it with a warning); none is a recipe.
        fail("stand-in %s: -t puts a terminal between pykernel and the kernel" % TOOL)
    if not ("-i" in flags or "--stdin" in flags or "--interactive" in flags):
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    try:
        os.execvp(command[0], command)
    except OSError as e:
        fail("exec: %r: %s" % (command[0], e.strerror), 126)


def jsonpath(obj, expr):
    m = re.fullmatch(r"jsonpath=\{\.(.*)\}", expr)
    if not m:
        fail("error: unsupported output format %r" % expr)
    for key in re.split(r"(?<!\\)\.", m.group(1)):
        obj = (obj or {}).get(key.replace("\\.", "."))
    return "" if obj is None else str(obj)


def claim_path(name):
    return os.path.join(CLAIMS_DIR, name + ".json")


def load_claim(name):
    try:
        with open(claim_path(name)) as f:
            return json.load(f)
    except FileNotFoundError:
        fail('Error from server (NotFound): %s "%s" not found' % (CLAIMS, name))


def create(stdin_text):
    claim = json.loads(stdin_text)
    name = claim.get("metadata", {}).get("name", "")
    spec = claim.get("spec", {})
    lifecycle = spec.get("lifecycle") or {}
    problems = []
    if claim.get("apiVersion") != "extensions.agents.x-k8s.io/v1beta1" or claim.get("kind") != "SandboxClaim":
        problems.append("not a v1beta1 SandboxClaim")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name):
        problems.append("metadata.name %r is not a DNS label" % name)
    if not (spec.get("warmPoolRef") or {}).get("name"):
        problems.append("spec.warmPoolRef.name: Required value")
    if "shutdownTime" in lifecycle and not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", lifecycle["shutdownTime"]):
        problems.append("spec.lifecycle.shutdownTime is not a date-time")
    if lifecycle.get("shutdownPolicy", "Retain") not in ("Delete", "DeleteForeground", "Retain"):
        problems.append("spec.lifecycle.shutdownPolicy is not one of Delete, DeleteForeground, Retain")
    if problems:
        fail("The SandboxClaim %r is invalid: %s" % (name, "; ".join(problems)))
    os.makedirs(CLAIMS_DIR, exist_ok=True)
    n = len(os.listdir(CLAIMS_DIR)) + len(open(os.path.join(HERE, "calls.jsonl")).read().splitlines())
    pool = spec["warmPoolRef"]["name"]
    sandbox = {"metadata": {"name": "%s-sb%d" % (pool, n), "annotations": {"agents.x-k8s.io/pod-name": "%s-pod%d" % (pool, n)}}}
    claim["status"] = {"sandbox": {"name": sandbox["metadata"]["name"]}, "conditions": [{"type": "Ready", "status": "True"}]}
    claim["sandboxObject"] = sandbox
    try:
        fd = os.open(claim_path(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        fail('Error from server (AlreadyExists): error when creating "STDIN": %s "%s" already exists' % (CLAIMS, name))
    with os.fdopen(fd, "w") as f:
        json.dump(claim, f)
    print("sandboxclaim.extensions.agents.x-k8s.io/%s created" % name)


def kubectl():
    # The command after `--` is the command's own; kubectl's options come before it.
    flags, positionals, rest = parse(ARGS, stop_at_first_positional=False)
    verb = positionals[0] if positionals else None
    if verb == "exec":
        if rest is None:
            fail("error: unknown shorthand flag: 'u' in -u")
        if len(positionals) != 2:
            fail("error: expected 'exec POD_NAME COMMAND [ARG1] [ARG2] ... [ARGN]'")
        run_here(flags, rest)
    elif verb == "create" and flags.get("-f") == "-":
        create(sys.stdin.read())
    elif verb == "wait" and flags.get("--for") == "condition=Ready":
        kind, _, name = positionals[1].partition("/")
        if kind != CLAIMS:
            fail("error: the server doesn't have a resource type %r" % kind)
        load_claim(name)
        print("%s/%s condition met" % (CLAIMS, name))
    elif verb == "get" and len(positionals) == 3:
        kind, name = positionals[1], positionals[2]
        if kind == CLAIMS:
            print(jsonpath(load_claim(name), flags.get("-o", "")), end="")
        elif kind == SANDBOXES:
            for f in os.listdir(CLAIMS_DIR) if os.path.isdir(CLAIMS_DIR) else []:
                sandbox = load_claim(f[:-5])["sandboxObject"]
                if sandbox["metadata"]["name"] == name:
                    print(jsonpath(sandbox, flags.get("-o", "")), end="")
                    return
            fail('Error from server (NotFound): %s "%s" not found' % (SANDBOXES, name))
        else:
            fail("error: the server doesn't have a resource type %r" % kind)
    elif verb == "delete" and len(positionals) == 3 and positionals[1] == CLAIMS:
        try:
            os.unlink(claim_path(positionals[2]))
            print('%s "%s" deleted' % (CLAIMS, positionals[2]))
        except FileNotFoundError:
            if "--ignore-not-found" not in flags:
                fail('Error from server (NotFound): %s "%s" not found' % (CLAIMS, positionals[2]))
    else:
        fail("stand-in kubectl: %r is not something the recipes do" % (ARGS,))


def container_tool():
    if not ARGS or ARGS[0] != "exec":
        fail("stand-in %s: only `exec` is stood in for, got %r" % (TOOL, ARGS))
    # Options end at the container's name; what follows is the command (a `--` is skipped).
    flags, positionals, rest = parse(ARGS[1:], stop_at_first_positional=True)
    if not positionals:
        fail('"%s exec" requires at least 2 arguments.' % TOOL)
    if rest and rest[0] == "--":
        rest = rest[1:]
    run_here(flags, rest)


if __name__ == "__main__":
    record()
    kubectl() if TOOL == "kubectl" else container_tool()
