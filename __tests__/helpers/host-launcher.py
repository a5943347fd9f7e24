"""Starts a test's host process the way a real host could be found: as another user, on a
machine that refuses user namespaces, with a secret in its session keyring, with a
terminal a person types into.  Then runs the command after ``--``.

    python3 host-launcher.py [--user NAME] [--no-userns] [--key NAME=VALUE] [--pty]
                             [--report FILE] -- node fixture.js ...

--no-userns   a seccomp filter refuses every new user namespace (EPERM for unshare and
              clone with CLONE_NEWUSER, ENOSYS for clone3 so libc falls back to clone):
              what Docker's default profile, a sysctl or AppArmor leave a host.
--user NAME   drops to that user (its groups, uid and gid; HOME, USER, LOGNAME).
--key N=V     a fresh session keyring holding the user key N with value V, as a host
              keeps an API token (``keyctl add user N V @s``).
--pty         a pseudo-terminal stands for the agent's terminal: its slave's path is in
              TARGET_PTY; this process keeps the master and types a password into it once
              the command has run for TYPE_AFTER seconds (default 1).
--report FILE when the command has ended, this process writes there, as JSON, what the
              terminal showed (`pty`) and the descriptions of the keys left in the session
              keyring (`keys`), so a test can tell what the command's children did to them.

Linux only; stdlib only.
"""

import ctypes
import json
import os
import platform
import pwd
import select
import struct
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
CLONE_NEWUSER = 0x10000000
# (audit arch, unshare, clone, clone3)
ARCHES = {
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM, ENOSYS = 1, 38
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x45, 0x06
KEYCTL_JOIN_SESSION_KEYRING = 1
KEYCTL_DESCRIBE = 6
KEYCTL_READ = 11
KEY_SPEC_SESSION_KEYRING = -3
SYS_ADD_KEY = {"x86_64": 248, "aarch64": 217}
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}
TYPED = b"hunter2-the-users-password\n"


def refuse_user_namespaces():
    audit, unshare, clone, clone3 = ARCHES[platform.machine()]

    def ins(code, k, jt=0, jf=0):
        return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)

    prog = [
        ins(BPF_LD_W_ABS, 4),                       # arch
        ins(BPF_JEQ_K, audit, 1, 0),
        ins(BPF_RET_K, SECCOMP_RET_ALLOW),
        ins(BPF_LD_W_ABS, 0),                       # syscall number
        ins(BPF_JEQ_K, clone3, 0, 1),
        ins(BPF_RET_K, SECCOMP_RET_ERRNO | ENOSYS),
        ins(BPF_JEQ_K, unshare, 1, 0),
        ins(BPF_JEQ_K, clone, 0, 3),
        ins(BPF_LD_W_ABS, 16),                      # args[0], low half
        ins(BPF_JSET_K, CLONE_NEWUSER, 0, 1),
        ins(BPF_RET_K, SECCOMP_RET_ERRNO | EPERM),
        ins(BPF_RET_K, SECCOMP_RET_ALLOW),
    ]
    code = b"".join(prog)
    buf = ctypes.create_string_buffer(code)

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Prog(len(prog), ctypes.addressof(buf))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")


def become(name):
    entry = pwd.getpwnam(name)
    os.initgroups(name, entry.pw_gid)
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    os.environ.update(HOME=entry.pw_dir, USER=name, LOGNAME=name)


def add_session_key(name, value):
    arch = platform.machine()
    if libc.syscall(SYS_KEYCTL[arch], KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        raise OSError(ctypes.get_errno(), "join_session_keyring")
    data = value.encode()
    serial = libc.syscall(SYS_ADD_KEY[arch], b"user", name.encode(), data, len(data),
                          KEY_SPEC_SESSION_KEYRING)
    if serial < 0:
        raise OSError(ctypes.get_errno(), "add_key")


def session_keys():
    """The descriptions of the keys in our session keyring (`type;uid;gid;perm;name`)."""
    arch = platform.machine()
    ids = ctypes.create_string_buffer(4096)
    n = libc.syscall(SYS_KEYCTL[arch], KEYCTL_READ, KEY_SPEC_SESSION_KEYRING, ids, 4096)
    if n < 0:
        return ["error %d" % ctypes.get_errno()]
    keys = []
    for (serial,) in struct.iter_unpack("i", ids.raw[:n]):
        text = ctypes.create_string_buffer(512)
        m = libc.syscall(SYS_KEYCTL[arch], KEYCTL_DESCRIBE, serial, text, 512)
        keys.append(text.value.decode() if m >= 0 else "unreadable %d" % serial)
    return keys


def main(argv):
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    user = key = report = None
    no_userns = with_pty = False
    i = 0
    while i < len(options):
        flag = options[i]
        if flag in ("--no-userns", "--pty"):
            no_userns = no_userns or flag == "--no-userns"
            with_pty = with_pty or flag == "--pty"
            i += 1
            continue
        value = options[i + 1]
        if flag == "--user":
            user = value
        elif flag == "--key":
            key = value.split("=", 1)
        elif flag == "--report":
            report = value
        else:
            sys.exit("host-launcher: unknown option %s" % flag)
        i += 2
    master = None
    if with_pty:
        master, slave = os.openpty()
        os.environ["TARGET_PTY"] = os.ttyname(slave)
        if user:
            os.chown(os.ttyname(slave), pwd.getpwnam(user).pw_uid, -1)
    if user:
        become(user)
    if no_userns:
        refuse_user_namespaces()
    if key:
        add_session_key(*key)
    child = os.fork()
    if child == 0:
        if master is not None:
            os.close(master)
        os.execvp(command[0], command)
    seen = b""
    typed = False
    started = time.monotonic()
    type_after = float(os.environ.get("TYPE_AFTER", "1"))
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            break
        if master is None:
            time.sleep(0.02)
            continue
        if not typed and time.monotonic() - started > type_after:
            os.write(master, TYPED)
            typed = True
        if select.select([master], [], [], 0.02)[0]:
            try:
                seen += os.read(master, 4096)
            except OSError:
                pass
    while master is not None and select.select([master], [], [], 0)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    if report:
        with open(report, "w") as f:
            json.dump({"pty": seen.decode("utf-8", "replace"),
                       "keys": session_keys() if key else []}, f)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main(sys.argv[1:])
