"""The hostile cases of docs/reliability.md, run against a real ipykernel through jupyter_client.

    bench/.venv-jupyter/bin/python bench/jupyter_hostile.py [--only NAME ...] [--list]

Each case starts a fresh ipykernel the way Jupyter Server does (an AsyncIOLoopKernelManager:
the kernel inherits the client's environment, and the manager's restarter, the "nanny",
restarts a kernel that dies), runs the same cells as __tests__/hostile/*.test.js and records
what a client observes: the execute_reply, the iopub messages (stream bytes, errors,
results, output that arrives under another cell's id), whether the kernel died or was
restarted, whether it answers `1+1` afterwards, how long the client waited.

Writes bench/results/jupyter-hostile.{json,md} (with --only: jupyter-hostile-only.*, so a
partial run never replaces the full one; --out NAME picks another name).

Safe on a shared machine:
- every wait has a deadline and every case an overall limit: on a timeout the case is
  recorded as hung and its kernels are killed;
- every kernel is started with JUPYTER_RUNTIME_DIR pointing at a private temporary
  directory, so the final sweep finds any kernel of this run by its connection file (also
  one restarted by the nanny, forked by a cell or orphaned by the host-ends case) and kills
  its process group; processes a case left behind are killed by pid;
- IPYTHONDIR points there too: the 100 MB cell lands in a throwaway history database, not
  in the user's ~/.ipython;
- memory: flood output is counted, never stored; the memory hog runs under an RLIMIT_AS the
  cell sets in its own kernel; the fork check stops at 50 processes; no real fork bomb.
"""
from __future__ import annotations

import argparse
import ast
import asyncio
import datetime
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from queue import Empty

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.path.join(HERE, "results")
MB = 1000 * 1000
MiB = 1024 * 1024
GiB = 1024**3


def now():
    return time.perf_counter()


def secs(value):
    return None if value is None else round(value, 3)


# ---------------------------------------------------------------------------------------
# /proc helpers: liveness, process groups, memory


def proc_stat(pid):
    """(state, ppid, pgrp, session) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    rest = data[data.rindex(")") + 2 :].split()
    return rest[0], int(rest[1]), int(rest[2]), int(rest[3])


def alive(pid):
    """Running (a zombie counts as gone: it only waits to be reaped)."""
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def all_pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def group_members(pgid):
    """Live processes in process group `pgid` (a kernel is its group's leader)."""
    out = []
    for pid in all_pids():
        st = proc_stat(pid)
        if st and st[2] == pgid and st[0] not in ("Z", "X"):
            out.append(pid)
    return out


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def status_kib(pid, field):
    """A /proc/<pid>/status field in KiB (VmRSS, VmHWM: the peak RSS since start or
    since reset_peak()); None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_kib(pid):
    return status_kib(pid, "VmRSS")


def peak_kib(pid):
    return status_kib(pid, "VmHWM")


def reset_peak(pid):
    """Resets VmHWM to the current RSS (Linux: "5" in clear_refs); False if not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def kill_pid(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def wait_until(predicate, timeout, interval=0.05):
    """Polls `predicate` until true or `timeout` s; returns the seconds it took or None."""
    t0 = now()
    while True:
        if predicate():
            return now() - t0
        if now() - t0 >= timeout:
            return None
        await asyncio.sleep(interval)


class RssSampler:
    """The peak RSS of some pids (this client first) over a span: the kernel's VmHWM peak
    counter, reset at the start, and as a fallback a thread sampling every 20 ms (which can
    miss a peak: decoding one huge message holds the GIL for seconds)."""

    def __init__(self, pids):
        self.pids = list(pids)
        self.hwm_reset = {p: reset_peak(p) for p in self.pids}
        self.start_kib = {p: rss_kib(p) or 0 for p in self.pids}
        self.max_kib = dict(self.start_kib)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self):
        while not self._stop.wait(0.02):
            self._sample()

    def _sample(self):
        for p in self.pids:
            v = rss_kib(p)
            if v is not None and v > self.max_kib[p]:
                self.max_kib[p] = v

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._sample()
        for p in self.pids:
            hwm = peak_kib(p) if self.hwm_reset[p] else None
            if hwm is not None and hwm > self.max_kib[p]:
                self.max_kib[p] = hwm
        return {
            str(p): {
                "startMiB": round(self.start_kib[p] / 1024, 1),
                "maxMiB": round(self.max_kib[p] / 1024, 1),
                "growthMiB": round((self.max_kib[p] - self.start_kib[p]) / 1024, 1),
            }
            for p in self.pids
        }


# ---------------------------------------------------------------------------------------
# A kernel as a Jupyter client sees it


class Kernel:
    """One kernel manager + client. Keeps a log of every iopub message that was not for
    the cell being run (late output of earlier cells, restarts), since where output lands
    is one of the things measured."""

    def __init__(self, run):
        self.run = run
        self.km = None
        self.kc = None
        self.pids = []  # every kernel process this manager ran (a restart adds one)
        self.restarts = []  # perf_counter times of the nanny's restart callbacks
        self.dead = []  # ... of its "dead" callbacks (restart limit reached)
        self.stray = []  # iopub messages not for the cell being run
        self.cells = {}  # msg_id -> index of the cell, in order sent
        self.last_cell_t0 = None  # perf_counter time the last cell was sent
        self.log_path = None
        self.log = None
        self.stopped = False

    async def start(self, ready_timeout=60.0):
        from jupyter_client.ioloop import AsyncIOLoopKernelManager

        self.run.kernels.append(self)
        n = len(self.run.kernels)
        # The kernel's own stdout/stderr (not its cells': those are piped to iopub) go to a
        # file, so a crash trace the server's log would show can be reported.
        self.log_path = os.path.join(self.run.tmp, f"kernel-{n}.log")
        # Kept open until stop(): the nanny's restarts launch with the same arguments.
        self.log = open(self.log_path, "wb")
        # The connection file in our private runtime dir: the kernel's command line names
        # it, which is how the final sweep recognises this run's kernels.
        self.km = km = AsyncIOLoopKernelManager(connection_file=os.path.join(self.run.runtime_dir, f"kernel-{n}.json"))
        await asyncio.wait_for(km.start_kernel(stdout=self.log, stderr=self.log), ready_timeout)
        # The restarter exists only once the kernel is started (earlier, this is a no-op).
        km.add_restart_callback(lambda: self.restarts.append(now()), "restart")
        km.add_restart_callback(lambda: self.dead.append(now()), "dead")
        self.remember()
        await self.connect(ready_timeout)
        return self

    async def connect(self, ready_timeout=30.0):
        """A fresh client on the manager's current connection info (after a restart with
        new ports the old client talks to nobody)."""
        if self.kc is not None:
            self.kc.stop_channels()
        self.kc = self.km.client()
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=ready_timeout)

    @property
    def process(self):
        p = self.km.provisioner if self.km else None
        return p.process if p is not None and getattr(p, "process", None) is not None else None

    @property
    def pid(self):
        proc = self.process
        return proc.pid if proc else None

    def remember(self):
        """Registers the current kernel process for the final cleanup."""
        pid = self.pid
        if pid and pid not in self.pids:
            self.pids.append(pid)
            self.run.kernel_pgids.add(pid)  # started with setsid: pid == pgid

    def exit_code(self):
        proc = self.process
        return proc.poll() if proc else None

    def ports(self):
        info = self.km.get_connection_info()
        return tuple(info.get(k) for k in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"))

    def log_size(self):
        try:
            return os.path.getsize(self.log_path)
        except (OSError, TypeError):
            return 0

    def log_since(self, offset, limit=20000):
        """What the kernel wrote to its own stderr since `offset` (see log_size)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read(limit).decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def log_tail(self, limit=800):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - limit))
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    async def stop(self, now_=True, timeout=20.0):
        """Shuts the kernel down (kill by default); returns the seconds it took."""
        if self.stopped or self.km is None:
            return 0.0
        self.stopped = True
        t0 = now()
        try:
            if self.kc is not None:
                self.kc.stop_channels()
        except Exception:
            pass
        try:
            await asyncio.wait_for(self.km.shutdown_kernel(now=now_), timeout)
        except BaseException:
            pass
        finally:
            for pgid in self.pids:
                self.run.kill_group(pgid)
            if self.log is not None:
                self.log.close()
        return now() - t0

    async def run_cell(self, code, limit=30.0, *, allow_stdin=False, on_stream=None, keep=64 * 1024,
                       interrupt_after=None, linger=0.0):
        """Sends `code` and records what arrives for it until its execute_reply and iopub
        `idle` are both in (plus `linger` s, to catch late or duplicate messages), or until
        `limit` s have passed: then the cell counts as hung. Stream text is kept up to
        `keep` characters per stream; `on_stream(name, text)` sees all of it."""
        kc = self.kc
        t0 = self.last_cell_t0 = now()
        msg_id = kc.execute(code, allow_stdin=allow_stdin)
        self.cells[msg_id] = len(self.cells)
        obs = {
            "codeBytes": len(code.encode("utf-8", "surrogatepass")),
            "reply": None, "replies": [], "idle": False, "tIdle": None, "tReply": None,
            "streamBytes": {"stdout": 0, "stderr": 0}, "streamMsgs": 0, "maxStreamMsgBytes": 0,
            "text": {"stdout": "", "stderr": ""}, "results": [], "errors": [], "displays": 0,
            "executeInputBytes": None, "loneSurrogates": False,
            "strayDuring": 0, "deaths": [], "restartsDuring": 0, "interrupt": None,
        }
        restarts_before = len(self.restarts)
        state = {"stop": False, "doneAt": None}

        def finished():
            return obs["reply"] is not None and obs["idle"]

        def on_iopub(msg):
            parent = msg.get("parent_header", {}).get("msg_id")
            mtype = msg["msg_type"]
            content = msg["content"]
            if parent != msg_id:
                self.log_stray(msg, during=msg_id)
                obs["strayDuring"] += 1
                return
            if mtype == "status":
                if content.get("execution_state") == "idle" and not obs["idle"]:
                    obs["idle"] = True
                    obs["tIdle"] = now() - t0
            elif mtype == "stream":
                name, text = content.get("name", "?"), content.get("text", "")
                nbytes = len(text.encode("utf-8", "surrogatepass"))
                obs["streamBytes"][name] = obs["streamBytes"].get(name, 0) + nbytes
                obs["streamMsgs"] += 1
                obs["maxStreamMsgBytes"] = max(obs["maxStreamMsgBytes"], nbytes)
                if any(0xD800 <= ord(c) <= 0xDFFF for c in text[:4096]):
                    obs["loneSurrogates"] = True
                kept = obs["text"].get(name, "")
                if len(kept) < keep:
                    obs["text"][name] = kept + text[: keep - len(kept)]
                if on_stream is not None:
                    on_stream(name, text)
            elif mtype == "execute_result":
                obs["results"].append(content.get("data", {}).get("text/plain", "")[: max(keep, 64 * 1024)])
            elif mtype == "error":
                obs["errors"].append(f"{content.get('ename')}: {str(content.get('evalue'))[:200]}")
            elif mtype == "display_data":
                obs["displays"] += 1
            elif mtype == "execute_input":
                obs["executeInputBytes"] = len(content.get("code", "").encode("utf-8", "surrogatepass"))

        def on_shell(msg):
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                return
            c = msg["content"]
            r = {"status": c.get("status"), "executionCount": c.get("execution_count"),
                 "ename": c.get("ename"), "evalue": str(c.get("evalue"))[:200] if c.get("evalue") is not None else None,
                 "t": secs(now() - t0)}
            obs["replies"].append(r)
            if obs["reply"] is None:
                obs["reply"] = r
                obs["tReply"] = now() - t0

        async def pump(get, handle):
            while not state["stop"]:
                try:
                    msg = await get(timeout=0.1)
                except Empty:
                    continue
                except Exception as e:  # a channel closed under us (restart): stop reading it
                    obs.setdefault("channelErrors", []).append(f"{type(e).__name__}: {e}")
                    await asyncio.sleep(0.1)
                    continue
                handle(msg)

        async def watch():
            """Ends the wait; sends the interrupt; notes a death as soon as it happens (a
            Jupyter client only learns of it from the nanny's restart, if at all)."""
            seen_dead = set()
            while True:
                t = now()
                if finished():
                    if state["doneAt"] is None:
                        state["doneAt"] = t
                    if t - state["doneAt"] >= linger:
                        break
                if t - t0 >= limit:
                    break
                if interrupt_after is not None and obs["interrupt"] is None and t - t0 >= interrupt_after:
                    obs["interrupt"] = {"sentAt": secs(t - t0)}
                    try:
                        await self.km.interrupt_kernel()
                    except Exception as e:
                        obs["interrupt"]["error"] = f"{type(e).__name__}: {e}"
                proc = self.process
                if proc is not None and proc.pid not in seen_dead:
                    rc = proc.poll()
                    if rc is not None:
                        seen_dead.add(proc.pid)
                        obs["deaths"].append({"pid": proc.pid, "exitCode": rc, "t": secs(now() - t0)})
                self.remember()
                await asyncio.sleep(0.02)
            state["stop"] = True

        await asyncio.gather(pump(kc.get_iopub_msg, on_iopub), pump(kc.get_shell_msg, on_shell), watch())
        obs["waited"] = secs(now() - t0)
        obs["hung"] = not finished()
        obs["tIdle"], obs["tReply"] = secs(obs["tIdle"]), secs(obs["tReply"])
        obs["restartsDuring"] = len(self.restarts) - restarts_before
        if obs["interrupt"] is not None and obs["tReply"] is not None:
            obs["interrupt"]["replyAfter"] = secs(obs["tReply"] - obs["interrupt"]["sentAt"])
        if not obs["strayDuring"]:
            del obs["strayDuring"]
        return obs

    def log_stray(self, msg, during):
        parent = msg.get("parent_header", {}).get("msg_id")
        content = msg["content"]
        rec = {"parentCell": self.cells.get(parent), "duringCell": self.cells.get(during), "type": msg["msg_type"]}
        if msg["msg_type"] == "stream":
            rec["name"] = content.get("name")
            rec["text"] = content.get("text", "")[:2000]
        elif msg["msg_type"] == "status":
            rec["state"] = content.get("execution_state")
        self.stray.append(rec)

    async def drain(self, seconds):
        """Reads iopub for `seconds` with no cell running: late output of finished cells."""
        end = now() + seconds
        while now() < end:
            try:
                msg = await self.kc.get_iopub_msg(timeout=max(0.01, end - now()))
            except Empty:
                break
            self.log_stray(msg, during=None)

    async def answers(self, limit=10.0):
        """Does the kernel answer `1+1` (and print)? Returns (ok, observation)."""
        obs = await self.run_cell("print('still here')\n1+1", limit=limit)
        ok = obs["results"] == ["2"] and obs["text"]["stdout"] == "still here\n"
        return ok, obs


def outcome(obs):
    """One line: how the cell ended as the client saw it."""
    if obs["reply"] is None:
        return f"no reply within {obs['waited']:.0f} s"
    r = obs["reply"]
    if r["status"] == "ok":
        return "ok"
    return f"{r['status']} {r['ename']}" + (f": {r['evalue']}" if r["evalue"] else "")


def trim(obs):
    """An observation for the JSON report, without empty fields."""
    return {k: v for k, v in obs.items() if v not in (None, [], {}, "", 0) or k in ("hung",)}


# ---------------------------------------------------------------------------------------
# The run: kernels, leftovers, cleanup


class Run:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="jupyter-hostile-")
        self.runtime_dir = os.path.join(self.tmp, "runtime")
        os.makedirs(self.runtime_dir, mode=0o700)
        self.kernels = []  # every Kernel started, in order
        self.kernel_pgids = set()  # every kernel process group (pid of a kernel)
        self.leftover_pids = set()  # processes a case left behind, killed at its end

    async def kernel(self):
        return await Kernel(self).start()

    def kill_group(self, pgid):
        """Kills what is left of a kernel's process group. Only groups that are also their
        own session (the kernel was started with setsid) are signalled, so a recycled pid is
        never taken for one of ours."""
        for pid in group_members(pgid):
            st = proc_stat(pid)
            if st and st[3] == pgid:
                kill_pid(pid)

    def sweep(self):
        """Kills any process of this run that is still alive: kernels (found by their
        connection file under our private runtime dir), their groups, recorded leftovers.
        Returns what it had to kill."""
        killed = []
        for pid in all_pids():
            if pid != os.getpid() and self.tmp in cmdline(pid):
                st = proc_stat(pid)
                if st and st[0] not in ("Z", "X"):
                    self.kernel_pgids.add(st[2] if st[2] == st[3] else pid)
                    kill_pid(pid)
                    killed.append(pid)
        for pgid in list(self.kernel_pgids):
            members = group_members(pgid)
            if members:
                self.kill_group(pgid)
                killed += members
        for pid in list(self.leftover_pids):
            if alive(pid):
                kill_pid(pid)
                killed.append(pid)
        self.leftover_pids.clear()
        return sorted(set(killed))

    async def end_case(self):
        for k in self.kernels:
            await k.stop()
        return self.sweep()


# ---------------------------------------------------------------------------------------
# Cases. Each returns {"outcome": one line, ...details}; the code is the tests' code.


async def case_flood(run):
    """1 GiB printed: 100-byte lines written in chunks of 1,000 (the test's cell). ipykernel
    sends it all in a few huge messages and both sides hold copies (~3x in the kernel), so
    the size is scaled down when the machine lacks the memory (or by --flood-mib)."""
    mib = run.args.flood_mib
    with open("/proc/meminfo") as f:
        avail_mib = next(int(l.split()[1]) // 1024 for l in f if l.startswith("MemAvailable:"))
    if avail_mib < 8 * mib:  # kernel ~3x + client ~1-3x the output, with room to spare
        mib = max(50, avail_mib // 8 // 50 * 50)
    run.flood_mib_used = mib
    size = mib * MiB
    line_len = 100
    lines = size // line_len
    code = "\n".join([
        "import sys",
        f"line = 'x' * {line_len - 1} + '\\n'",
        "chunk = line * 1000",
        "w = sys.stdout.write",
        f"for _ in range({lines // 1000}): w(chunk)",
        f"w(line * {lines % 1000})",
        "print('THE END')",
    ])
    expected = lines * line_len + len("THE END\n")
    seen = {"x": 0, "nl": 0, "tail": ""}

    def check(name, text):  # validates as it goes: nothing is kept
        if name == "stdout":
            seen["x"] += text.count("x")
            seen["nl"] += text.count("\n")
            seen["tail"] = (seen["tail"] + text)[-64:]

    k = await run.kernel()
    rss = RssSampler([os.getpid(), k.pid])
    obs = await k.run_cell(code, limit=run.args.flood_limit, on_stream=check, keep=0)
    mem = rss.stop()
    got = obs["streamBytes"]["stdout"]
    complete = got == expected and seen["x"] == lines * (line_len - 1) and seen["nl"] == lines + 1 and seen["tail"].endswith("x\nTHE END\n")
    elapsed = obs["tIdle"] or obs["waited"]
    works, _ = await k.answers()
    client, kern = mem[str(os.getpid())], mem[str(k.pid)]
    rate = got / MB / elapsed if elapsed else 0
    scale = "1 GiB" if mib == 1024 else f"{mib} MiB (scaled from 1 GiB)"
    return {
        "outcome": (f"{scale}: {got / MiB:.0f} of {expected / MiB:.0f} MiB arrived"
                    f" {'complete and valid' if complete else 'INCOMPLETE/INVALID'} at {rate:.0f} MB/s"
                    f" in {obs['streamMsgs']} stream message(s) (largest {obs['maxStreamMsgBytes'] / MiB:.0f} MiB);"
                    f" peak RSS: client +{client['growthMiB']:.0f} MiB though it keeps nothing, kernel +{kern['growthMiB']:.0f} MiB;"
                    f" no cap or truncation; {outcome(obs)} (reply at {obs['tReply']} s, output done at {obs['tIdle']} s);"
                    f" kernel works after: {works}"),
        "scaleMiB": mib, "expectedBytes": expected, "receivedBytes": got, "complete": complete,
        "MBps": round(rate, 1), "rss": mem, "cell": trim(obs), "kernelWorksAfter": works,
    }


async def case_line_50mb(run):
    size = 50 * MB
    k = await run.kernel()
    rss = RssSampler([os.getpid(), k.pid])
    obs = await k.run_cell(f"import sys, time\nsys.stdout.write('y' * {size})\nsys.stdout.flush()\ntime.sleep(0.5)",
                           limit=60, keep=0)
    mem = rss.stop()
    works, _ = await k.answers()
    got = obs["streamBytes"]["stdout"]
    client, kern = mem[str(os.getpid())], mem[str(k.pid)]
    return {
        "outcome": (f"{got / MB:.0f} of 50 MB arrived in {obs['streamMsgs']} stream message(s) (largest"
                    f" {obs['maxStreamMsgBytes'] / MB:.0f} MB), uncut: the client gets the whole line; peak RSS: client"
                    f" +{client['growthMiB']:.0f} MiB, kernel +{kern['growthMiB']:.0f} MiB; {outcome(obs)} after {obs['tIdle']} s;"
                    f" kernel works after: {works}"),
        "receivedBytes": got, "rss": mem, "cell": trim(obs), "kernelWorksAfter": works,
    }


async def case_tiny_writes(run):
    k = await run.kernel()
    obs = await k.run_cell("import sys\nw = sys.stdout.write\nfor _ in range(1_000_000): w('x')\nw('!')", limit=60, keep=2 * MB)
    text = obs["text"]["stdout"]
    exact = text == "x" * 1_000_000 + "!"
    works, _ = await k.answers()
    return {
        "outcome": (f"{'all' if exact else 'NOT all'} {len(text):,} bytes arrive{' in order' if exact else ''}, coalesced into"
                    f" {obs['streamMsgs']} stream messages, in {obs['tIdle']} s; {outcome(obs)}; kernel works after: {works}"),
        "exact": exact, "cell": trim({**obs, "text": None}), "kernelWorksAfter": works,
    }


CONTROL = set(range(0, 9)) | set(range(11, 32)) | {127}


async def case_binary_fd(run):
    k = await run.kernel()
    code = "\n".join([
        "import os, sys",
        'os.write(1, bytes(range(256)) + b"\\n")',
        'os.write(2, b"\\xff\\xfe\\xc3(\\x80 abc \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80\\n")',
        'os.write(1, b"\\xe2\\x82")  # a character cut in half, completed by nothing',
        'os.write(1, b"\\n")',
        'sys.stdout.buffer.write(b"\\x80\\x81 buffer\\n")',
        "print('after')",
    ])
    obs = await k.run_cell(code, limit=20)
    # ipykernel's sys.stdout has no .buffer, so that line fails the cell: run the rest
    # again without it to see what the fd writes become.
    rest = await k.run_cell(code.replace('sys.stdout.buffer.write(b"\\x80\\x81 buffer\\n")\n', ""), limit=20)
    out, err = rest["text"]["stdout"], rest["text"]["stderr"]
    printable = "".join(chr(c) for c in range(32, 127))
    checks = {
        "printableKept": printable in out,
        "replacementCharsInStdout": out.count("\ufffd"),
        "replacementCharsInStderr": err.count("\ufffd"),
        "bufferWriteArrived": " buffer\n" in out,
        "endsWithAfter": out.endswith("after\n"),
        "stderrAbc": " abc " in err,
        "controlCharsPassedToClient": sum(1 for c in out + err if ord(c) in CONTROL),
        "nulPassed": "\0" in out,
    }
    works, _ = await k.answers()
    return {
        "outcome": (f"the test's cell: {outcome(obs)}; without the buffer line: {outcome(rest)}; messages stay valid JSON;"
                    f" invalid bytes become U+FFFD"
                    f" ({checks['replacementCharsInStdout']} on stdout, {checks['replacementCharsInStderr']} on stderr),"
                    f" printable ASCII kept: {checks['printableKept']};"
                    + ("" if checks["endsWithAfter"] else " the last fd writes arrive after the later print('after');")
                    + f" {checks['controlCharsPassedToClient']} control characters (NUL, ESC, ...) reach the client raw;"
                    f" kernel works after: {works}"),
        "checks": checks, "stdout": out[:600], "stderr": err[:300], "cell": trim({**obs, "text": None}),
        "withoutBufferLine": trim({**rest, "text": None}),
        "kernelWorksAfter": works,
    }


async def case_surrogates_nul(run):
    k = await run.kernel()
    cells = {
        "print": "print('before \\ud800 mid \\udfff after')\n'done'",
        "stderr": "import sys\nsys.stderr.write('err \\udc80\\n')\nprint('ok')",
        "raise": "raise ValueError('bad \\ud800 value')",
        "repr": "class S:\n    def __repr__(self): return 'S<\\ud800>'\nS()",
        "nul": "import os, sys\nprint('a\\x00b')\nsys.stdout.flush()\nos.write(1, b'c\\x00d\\n')\nsys.stderr.write('e\\x00f\\n')\nos.write(1, b'tail\\x00')",
    }
    seen = {}
    for name, code in cells.items():
        obs = await k.run_cell(code, limit=15)
        await k.drain(0.3)  # output that arrives after idle (lost frames show up as missing)
        seen[name] = {"outcome": outcome(obs), "stdout": obs["text"]["stdout"][:200], "stderr": obs["text"]["stderr"][:200],
                      "results": obs["results"], "errors": obs["errors"], "loneSurrogatesReachedClient": obs["loneSurrogates"]}
    late = [s for s in k.stray if s["type"] == "stream"]
    works, _ = await k.answers()
    p, s, r, e, n = (seen[x] for x in ("print", "stderr", "raise", "repr", "nul"))
    nul_exact = n["stdout"] == "a\0b\nc\0d\ntail\0" and n["stderr"] == "e\0f\n"

    def said(c):  # what the client got for a cell, briefly
        if c["stdout"] or c["results"]:
            return f"{c['outcome']}, stdout {c['stdout'][:40]!r}, result {c['results']}"
        return f"{c['outcome']}"

    tb = " (a tornado 'Uncaught exception' traceback lands in the cell's stderr instead)" if "Uncaught exception" in p["stderr"] else ""
    return {
        "outcome": (f"print('\\ud800'): {said(p)}{tb}; sys.stderr.write('\\udc80'): {s['stderr']!r};"
                    f" raise ValueError('\\ud800'): {r['outcome'][:90]} (iopub error messages: {len(r['errors'])});"
                    f" repr with a surrogate: {e['outcome'][:60]};"
                    f" NUL: {'kept raw, passed to the client' if nul_exact else repr(n['stdout'])};"
                    f" kernel works after: {works}"),
        "cells": seen, "lateStreams": late[:10], "nulExact": nul_exact, "kernelWorksAfter": works,
        "kernelLogTail": k.log_tail(600),
    }


async def case_print_then_fd(run):
    k = await run.kernel()
    runs = []
    for _ in range(run.args.order_runs):
        obs = await k.run_cell("import os\nprint('1 print')\nos.write(1, b'2 fd\\n')\nprint('3 print')", limit=10)
        await k.drain(0.3)
        late = "".join(s.get("text", "") for s in k.stray if s["type"] == "stream")
        k.stray.clear()
        runs.append(obs["text"]["stdout"] + (f"[late:{late!r}]" if late else ""))
    kept = sum(1 for r in runs if r == "1 print\n2 fd\n3 print\n")
    orders = sorted(set(runs))
    return {
        "outcome": (f"order kept in {kept} of {len(runs)} runs; seen: " + "; ".join(repr(o) for o in orders)),
        "runs": runs, "kept": kept,
    }


async def death_case(run, code, limit=10.0):
    """A cell that kills its kernel: what the client sees, then whether the nanny's
    restart gives it a kernel back (the old client first, then a fresh one)."""
    k = await run.kernel()
    ports_before = k.ports()
    obs = await k.run_cell(code, limit=limit)
    cell_t0 = k.last_cell_t0
    # The nanny polls every 3 s and restarts; wait for the new process to be up.
    up = await wait_until(lambda: k.restarts and k.km.has_kernel and k.exit_code() is None, 15)
    k.remember()
    ports_after = k.ports()
    old_ok, old_obs = (await k.answers(limit=5)) if up is not None else (False, None)
    fresh_ok = None
    if up is not None and not old_ok:
        try:
            await k.connect(20)
            fresh_ok, _ = await k.answers(limit=10)
        except Exception as e:
            fresh_ok = f"{type(e).__name__}: {e}"
    death = obs["deaths"][0] if obs["deaths"] else None
    # When the nanny noticed, relative to the cell's start (it polls every 3 s).
    restart_at = secs(k.restarts[0] - cell_t0) if k.restarts else None
    return k, obs, {
        "death": death, "restarts": len(k.restarts), "restartAt": restart_at, "portsChanged": ports_before != ports_after,
        "oldClientAnswers": old_ok, "freshClientAnswers": fresh_ok, "restartUpAfterCell": secs(up),
        "oldClientObs": trim(old_obs) if old_obs else None, "kernelLogTail": k.log_tail(600),
    }


def describe_death(obs, info, what):
    d = info["death"]
    died = (f"the kernel died ({what}: exit code {d['exitCode']} after {d['t']} s, seen only by the manager: no message"
            f" carries it)") if d else "the kernel did not die"
    if info["restarts"]:
        back = (f"the nanny restarted it {info['restartAt']} s after the cell started ({info['restarts']}x;"
                f" new ports: {info['portsChanged']});"
                f" the same client answers 1+1 again: {info['oldClientAnswers']}"
                + (f", a fresh client does: {info['freshClientAnswers']}" if info["freshClientAnswers"] is not None else ""))
    else:
        back = "no restart seen"
    got = obs["text"]["stdout"]
    return (f"{outcome(obs)} (status stays busy, no error message; stdout before death: {got!r});"
            f" {died}; {back}; the cell is not retried")


async def case_os_exit(run):
    k, obs, info = await death_case(run, "import os\nprint('bye')\nos._exit(3)")
    return {"outcome": describe_death(obs, info, "os._exit(3)"), "cell": trim(obs), **info}


async def case_sigkill(run):
    k, obs, info = await death_case(run, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    return {"outcome": describe_death(obs, info, "SIGKILL"), "cell": trim(obs), **info}


async def case_segfault(run):
    k, obs, info = await death_case(run, "import ctypes\nctypes.string_at(0)")
    trace_in_log = "Segmentation fault" in info["kernelLogTail"] or "Fatal Python error" in info["kernelLogTail"]
    where = "only in the kernel's own stderr (the server log)" if trace_in_log else "nowhere, not even the kernel's own stderr"
    return {"outcome": describe_death(obs, info, "SIGSEGV") + f"; fault trace: {where}",
            "cell": trim(obs), "traceInKernelLog": trace_in_log, **info}


async def cells(k, codes, limit=15):
    out = []
    for code in codes:
        obs = await k.run_cell(code, limit=limit)
        lines = obs["text"]["stderr"].strip().splitlines()
        out.append({"code": code, "outcome": outcome(obs), "stdout": obs["text"]["stdout"][:300],
                    "stderr": obs["text"]["stderr"][:300], "stderrLast": lines[-1][:200] if lines else "",
                    "results": [r[:300] for r in obs["results"]], "errors": obs["errors"]})
    return out


def short(c):
    bits = [c["outcome"]]
    if c["stdout"]:
        bits.append(f"stdout {c['stdout']!r}")
    if c["stderr"]:
        bits.append(f"stderr {c['stderr'][:80]!r}")
    if c["results"]:
        bits.append(f"result {c['results'][0]}")
    return ", ".join(bits)


async def case_stdout_close(run):
    k = await run.kernel()
    seq = await cells(k, [
        "import sys\nsys.stdout.close()\nsys.stderr.close()\nprint('after close')\nprint('err after close', file=sys.stderr)",
        "print('still here')\n40 + 2",
        "import sys\nprint('to stderr', file=sys.stderr)",
    ])
    return {"outcome": f"cell: {short(seq[0])} | next cell: {short(seq[1])} | stderr next: {short(seq[2])}", "cells": seq}


async def case_stdout_42(run):
    """sys.stdout = 42, then sys.stderr = None (the test's follow-up), each on its own
    kernel: ipykernel flushes both after every request, so the next cell is the question."""
    k = await run.kernel()
    out42 = await cells(k, ["import sys\nsys.stdout = 42\nprint('junk')", "print('still here')\n40 + 2"], limit=6)
    tail42 = out42[0]["stderrLast"]
    await k.stop()
    k = await run.kernel()
    none = await cells(k, ["import sys\nsys.stderr = None\nraise ValueError('reported anyway')", "print('still here')\n40 + 2"],
                       limit=6)
    return {"outcome": (f"sys.stdout = 42: {out42[0]['outcome']} (a tornado traceback ending {tail42!r} lands in its stderr);"
                        f" next cell: {out42[1]['outcome']} | sys.stderr = None then raise: {none[0]['outcome']};"
                        f" next cell: {none[1]['outcome']} (every later cell hangs until a restart)"),
            "cells": out42 + none}


async def case_close_fd1(run):
    k = await run.kernel()
    seq = await cells(k, [
        "import os\nos.close(1)\nprint('print after close')",
        "import os\nos.readlink('/proc/self/fd/1') if os.path.exists('/proc/self/fd/1') else 'fd 1 closed'",
        "f = open('/dev/null', 'rb')\nf.fileno()",
        "import os, subprocess\nprint('p2', flush=True)\nos.system('echo shell2')\nsubprocess.run(['echo', 'sub2'])\nos.write(1, b'fd2\\n')\nNone",
        "print('still here')\n40 + 2",
    ])
    alive_after = k.exit_code() is None
    return {"outcome": (f"cell: {short(seq[0])} | fd 1 is then {seq[1]['results']}, open() takes fd {seq[2]['results']}"
                        f" | next cell (print, os.system, subprocess, os.write): {short(seq[3])} | print: {short(seq[4])};"
                        f" kernel alive: {alive_after}"),
            "cells": seq}


async def case_close_fd0(run):
    k = await run.kernel()
    seq = await cells(k, [
        # Before anything: what a child reads from the kernel's stdin by default.
        "import os, subprocess\nprint(os.readlink('/proc/self/fd/0'))\n"
        "try:\n    r = subprocess.run(['cat'], capture_output=True, timeout=3); print('cat ->', r.returncode, r.stdout)\n"
        "except subprocess.TimeoutExpired:\n    print('cat blocked on stdin for 3 s')",
        "import os\nos.close(0)\nprint('closed 0')",
        "import os\nos.readlink('/proc/self/fd/0') if os.path.exists('/proc/self/fd/0') else 'fd 0 closed'",
        "input()",
        "f = open('/etc/hostname')\nf.fileno()",
        "import subprocess\nr = subprocess.run(['cat'], capture_output=True, timeout=5)\n(r.returncode, r.stdout, r.stderr)",
        "print('still here')\n40 + 2",
    ])
    return {"outcome": (f"before: fd 0 and a child's stdin: {seq[0]['stdout'].strip()!r} | os.close(0): {short(seq[1])}"
                        f" | fd 0 is then {seq[2]['results']} | input() (allow_stdin=False): {short(seq[3])}"
                        f" | open() takes fd {seq[4]['results']} | child cat: {short(seq[5])} | then: {short(seq[6])}"),
            "cells": seq}


async def uninterruptible(run, code):
    """A cell that ignores the interrupt: interrupt_kernel() after 1 s, wait 8 s; then what a
    Jupyter user can do: restart the kernel (graceful, as the Restart button does)."""
    k = await run.kernel()
    obs = await k.run_cell(code, limit=9.0, interrupt_after=1.0)
    info = {"cell": trim(obs)}
    if obs["hung"]:
        t0 = now()
        try:
            await asyncio.wait_for(k.km.restart_kernel(now=False), 30)
            info["restartSeconds"] = secs(now() - t0)
            info["shutdownEscalation"] = str(getattr(k.km, "_shutdown_status", ""))
        except Exception as e:
            info["restartError"] = f"{type(e).__name__}: {e}"
        k.remember()
        works, _ = await k.answers(limit=10)
        info["worksAfterRestart"] = works
        how = {"_ShutdownStatus.ShutdownRequest": "it obeyed the shutdown_request",
               "_ShutdownStatus.SigtermRequest": "the shutdown_request went unanswered, SIGTERM ended it",
               "_ShutdownStatus.SigkillRequest": "shutdown_request and SIGTERM went unanswered, SIGKILL ended it",
               }.get(info.get("shutdownEscalation"), info.get("shutdownEscalation") or info.get("restartError"))
        line = (f"interrupt_kernel() has no effect: no reply {obs['waited'] - 1:.0f} s after it (the client waits until its own limit);"
                f" only a restart ends it: restart_kernel() took {info.get('restartSeconds')} s ({how});"
                f" the kernel's state is lost; 1+1 after: {works}")
    else:
        works, _ = await k.answers()
        info["worksAfter"] = works
        line = f"{outcome(obs)} {obs['interrupt'].get('replyAfter')} s after interrupt_kernel(); kernel works after: {works}"
    return {"outcome": line, **info}


async def case_sigint_ignored(run):
    return await uninterruptible(run, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.01)")


async def case_c_loop(run):
    return await uninterruptible(run, "sum(range(10**12))")


async def case_fork(run):
    """The test's two cells, each on its own kernel: a child that prints and is waited
    for, and a child nobody waits for."""
    k = await run.kernel()
    code = "\n".join([
        "import os",
        "pid = os.fork()",
        "if pid == 0:",
        "    print('child says hi')",
        "else:",
        "    os.waitpid(pid, 0)",
        "    print('parent waited')",
        "'child' if pid == 0 else 'parent'",
    ])
    waited = await k.run_cell(code, limit=12, interrupt_after=8, linger=1.0)
    forks_a = [p for p in group_members(k.pid) if p != k.pid]
    works_a, _ = await k.answers()
    await k.stop()
    k = await run.kernel()
    unwaited = await k.run_cell("import os\nchild = os.fork()\n'result'", limit=10, linger=1.5)
    await asyncio.sleep(1.5)
    forks_b = [p for p in group_members(k.pid) if p != k.pid]
    works_b, after = await k.answers()
    counts = [r["executionCount"] for r in unwaited["replies"] + after["replies"]]
    intr = waited["interrupt"] or {}
    a_end = (f"no reply after 8 s (the parent waits for a child that never ends), interrupt_kernel() then gives"
             f" {outcome(waited)} after {intr.get('replyAfter')} s") if intr else outcome(waited)
    return {
        "outcome": (f"waited child: the child carries on as a second copy of the kernel: it prints {waited['text']['stdout']!r}"
                    f" and sends results {waited['results']}; {a_end}; {len(forks_a)} fork(s) left alive, kernel works after:"
                    f" {works_a} | unwaited child: {outcome(unwaited)}, results {unwaited['results']}, {len(unwaited['replies'])}"
                    f" reply(ies), {len(forks_b)} stuck copy(ies) alive 3 s later (until shutdown); execution counts {counts};"
                    f" kernel works after: {works_b}"),
        "waited": trim(waited), "unwaited": trim(unwaited), "forksLeftA": forks_a, "forksLeftB": forks_b,
        "kernelWorksAfterA": works_a, "kernelWorksAfterB": works_b,
    }


SPAWN_200 = "import subprocess\nprocs = [subprocess.Popen(['sleep', '600']) for _ in range(200)]\n[p.pid for p in procs]"


async def case_children(run):
    """200 children left running, then the kernel is shut down: gracefully (a
    shutdown_request, as the Shut Down menu does) and with now=True (kill, as a forced
    restart does)."""
    out = {}
    for mode, graceful in (("graceful", True), ("now", False)):
        k = await run.kernel()
        obs = await k.run_cell(SPAWN_200, limit=30)
        try:
            pids = ast.literal_eval(obs["results"][0])
        except Exception:
            pids = []
        run.leftover_pids.update(pids)
        running = sum(1 for p in pids if alive(p))
        t0 = now()
        took = await k.stop(now_=not graceful)
        gone = await wait_until(lambda: not any(alive(p) for p in pids), 3)
        left = [p for p in pids if alive(p)]
        out[mode] = {"spawned": len(pids), "runningBefore": running, "shutdownSeconds": secs(took),
                     "allGoneAfter": secs(gone), "leftover": len(left), "cell": outcome(obs)}
    g, n = out["graceful"], out["now"]
    return {
        "outcome": (f"graceful shutdown_kernel(): {g['leftover']} of {g['spawned']} left (took {g['shutdownSeconds']} s: ipykernel"
                    f" terminates its children); shutdown_kernel(now=True): {n['leftover']} of {n['spawned']} left"
                    f" (took {n['shutdownSeconds']} s: SIGKILL to the kernel's process group)"),
        **out,
    }


async def case_daemon_thread(run):
    k = await run.kernel()
    code = "\n".join([
        "import sys, threading, time",
        "def spam():",
        "    for i in range(60):",
        "        time.sleep(0.025)",
        "        print('LEAK', i)",
        "        sys.stderr.write('LEAKERR %d\\n' % i)",
        "threading.Thread(target=spam, daemon=True).start()",
        "'started'",
    ])
    first = await k.run_cell(code, limit=10)
    later = []
    end = now() + 1.8  # the thread prints for ~1.5 s
    while now() < end:
        later.append(await k.run_cell("import time\ntime.sleep(0.1)\nprint('mine')", limit=10))
    await k.drain(0.5)
    # Where each LEAK line landed: under which cell's id, and before or after that cell's idle.
    leak = lambda text: text.count("LEAK")
    in_later = sum(leak(o["text"]["stdout"] + o["text"]["stderr"]) for o in later)
    in_first = leak(first["text"]["stdout"] + first["text"]["stderr"])
    late = [s for s in k.stray if s["type"] == "stream"]
    late_first = sum(leak(s.get("text", "")) for s in late if s["parentCell"] == 0)
    late_later = sum(leak(s.get("text", "")) for s in late if s["parentCell"] not in (0, None))
    no_parent = sum(leak(s.get("text", "")) for s in late if s["parentCell"] is None)
    polluted = sum(1 for o in later if o["text"]["stdout"] != "mine\n" or o["text"]["stderr"])
    works, _ = await k.answers()
    example = next((o["text"]["stdout"][:60] for o in later if "LEAK" in o["text"]["stdout"]), "")
    return {
        "outcome": (f"of 120 lines (60 print + 60 stderr) {in_later + late_later} are attributed to later cells"
                    f" ({in_later} inside their output, e.g. {example!r}; {late_later} just after their idle);"
                    f" {polluted} of {len(later)} later cells got foreign output; {in_first + late_first} stay with the"
                    f" finished cell ({late_first} after its idle), {no_parent} without a parent; kernel works after: {works}"),
        "leakInLaterCells": in_later, "leakLateUnderLaterCells": late_later, "laterCells": len(later),
        "pollutedLaterCells": polluted, "leakUnderFinishedCell": in_first + late_first, "leakNoParent": no_parent,
        "kernelWorksAfter": works,
    }


async def case_protocol_text(run):
    """Text that looks like Jupyter wire messages (delimiter, signature, headers carrying
    the running request's real msg_id), printed and written to fd 1."""
    k = await run.kernel()
    forge = "\n".join([
        "import os, json",
        "mid = get_ipython().kernel.get_parent()['header']['msg_id']",
        "hdr = lambda t: json.dumps({'msg_id': 'f-' + t, 'msg_type': t, 'session': 's', 'username': 'u', 'version': '5.3', 'date': ''})",
        "par = json.dumps({'msg_id': mid, 'msg_type': 'execute_request'})",
        "frames = ['<IDS|MSG>', '0' * 64, hdr('execute_reply'), par, '{}', json.dumps({'status': 'ok', 'execution_count': 99}),",
        "          hdr('status'), json.dumps({'execution_state': 'idle'}), hdr('execute_result'),",
        "          json.dumps({'data': {'text/plain': 'FORGED'}, 'execution_count': 99, 'metadata': {}})]",
    ])
    obs = await k.run_cell(forge + "\nfor f in frames: print(f)\nprint('after')\n'real result'", limit=15)
    obs2 = await k.run_cell(forge + "\nfor f in frames: os.write(1, f.encode() + b'\\n')\nos.write(1, b'after\\n')\n'real result'", limit=15)
    ok1 = obs["results"] == ["'real result'"] and len(obs["replies"]) == 1 and obs["text"]["stdout"].endswith("after\n") and "<IDS|MSG>" in obs["text"]["stdout"]
    ok2 = obs2["results"] == ["'real result'"] and len(obs2["replies"]) == 1 and "after\n" in obs2["text"]["stdout"] and "<IDS|MSG>" in obs2["text"]["stdout"]
    works, _ = await k.answers()
    return {
        "outcome": (f"it is stdout: printed {'shown as text, nothing forged' if ok1 else 'SOMETHING ODD'}, via os.write(1)"
                    f" {'shown as text, nothing forged' if ok2 else 'SOMETHING ODD'} (1 reply each, the real result);"
                    f" kernel works after: {works}"),
        "printed": trim({**obs, "text": None}), "fd1": trim({**obs2, "text": None}), "kernelWorksAfter": works,
    }


async def case_forged_messages(run):
    """The Jupyter counterpart of writing to the runner's private pipes: the cell runs in
    the process that holds the session's HMAC key and the sockets, so it can send signed
    messages with the running request's real parent header."""
    k = await run.kernel()
    code = "\n".join([
        "import time",
        "k = get_ipython().kernel",
        "parent = k.get_parent()",
        "k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': 'FORGED STDOUT\\n'}, parent=parent)",
        "k.session.send(k.iopub_socket, 'execute_result', {'data': {'text/plain': 'FORGED'}, 'metadata': {}, 'execution_count': 99}, parent=parent)",
        "k.session.send(k.iopub_socket, 'status', {'execution_state': 'idle'}, parent=parent)",
        "ident = k._parent_ident['shell']",
        "reply = {'status': 'ok', 'execution_count': 99, 'user_expressions': {}, 'payload': []}",
        "k.shell_stream.io_loop.add_callback(lambda: k.session.send(k.shell_stream, 'execute_reply', reply, parent, ident=ident))",
        "time.sleep(0.5)",
        "print('after')",
        "'real result'",
    ])
    obs = await k.run_cell(code, limit=15, linger=1.0)
    first_reply = obs["replies"][0] if obs["replies"] else None
    fooled_reply = bool(first_reply and first_reply["executionCount"] == 99)
    # A client that stops at the first idle + reply ends before 'after' and the real result.
    early = obs["tIdle"] is not None and obs["tReply"] is not None and obs["tIdle"] < 0.45
    works, _ = await k.answers()
    return {
        "outcome": (f"a cell holds the HMAC key and the sockets (kernel.session): signed forgeries with the real parent id are"
                    f" accepted: stdout {obs['text']['stdout']!r}, results {obs['results']}, {len(obs['replies'])} execute_replies"
                    f" (first one forged: {fooled_reply}), forged idle first: {early} (a client stopping there misses the real"
                    f" end); kernel works after: {works}"),
        "cell": trim(obs), "firstReplyForged": fooled_reply, "forgedIdleFirst": early, "kernelWorksAfter": works,
    }


async def case_inherited_fds(run):
    """The client holds an inheritable (non-close-on-exec) descriptor; does the kernel get it?"""
    path = os.path.join(run.tmp, "host-only.log")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    high = 100
    while True:  # the first free descriptor from 100 up
        try:
            os.fstat(high)
            high += 1
        except OSError:
            break
    os.dup2(fd, high, inheritable=True)
    os.close(fd)
    try:
        k = await run.kernel()
        links = {}
        for entry in os.listdir(f"/proc/{k.pid}/fd"):
            try:
                links[int(entry)] = os.readlink(f"/proc/{k.pid}/fd/{entry}")
            except OSError:
                pass
        leaked = [n for n, link in links.items() if link == path]
    finally:
        os.close(high)
    return {
        "outcome": (f"the kernel inherits none: the client's inheritable fd {high} is not among the kernel's {len(links)} fds"
                    if not leaked else f"INHERITED: the kernel holds the client's file as fd {leaked}")
                   + " (jupyter_client launches with Popen's default close_fds=True)",
        "clientFd": high, "leakedAs": leaked, "kernelFds": len(links),
    }


async def case_source_100mb(run):
    k = await run.kernel()
    sizes = {}
    for size in (10 * MB, 100 * MB):
        code = 'x = "' + "a" * size + '"\nlen(x)'
        rss = RssSampler([os.getpid(), k.pid])
        obs = await k.run_cell(code, limit=run.args.source_limit, keep=0)
        mem = rss.stop()
        del code
        sizes[f"{size // MB}MB"] = {"outcome": outcome(obs), "seconds": obs["tIdle"] or obs["waited"], "result": obs["results"],
                                    "executeInputEchoedBytes": obs["executeInputBytes"], "rss": mem, "hung": obs["hung"]}
        if obs["hung"]:
            break
        await k.run_cell("del x", limit=20)
    works, _ = await k.answers(limit=20)
    parts = []
    for name, s in sizes.items():
        client = s["rss"][str(os.getpid())]["growthMiB"]
        kern = s["rss"][str(k.pid)]["growthMiB"] if str(k.pid) in s["rss"] else None
        echoed = s["executeInputEchoedBytes"]
        parts.append(f"{name}: {s['outcome']} {s['result']} in {s['seconds']} s, source echoed back on iopub"
                     f" ({(echoed or 0) / MB:.0f} MB), peak RSS: client +{client:.0f} MiB, kernel +{kern:.0f} MiB")
    return {"outcome": "; ".join(parts) + f"; kernel works after: {works}", "sizes": sizes, "kernelWorksAfter": works}


NESTED = [
    ("'(' * 200 + ')' * 200", "(" * 200 + ")" * 200),
    ("'(' * 100000", "(" * 100_000),
    ("'[' * 5000 + ']' * 5000", "[" * 5000 + "]" * 5000),
    ("'x=' + '[' * 100000 + ']' * 100000", "x=" + "[" * 100_000 + "]" * 100_000),
    ("1000 nested if blocks", "".join("    " * i + "if 1:\n" for i in range(1000)) + "    " * 1000 + "pass\n"),
    ("'-' * 100000 + '1'", "x = " + "-" * 100_000 + "1"),
    ("'1+' * 100000 + '1'", "x = " + "1+" * 100_000 + "1"),
    ("'f' + '()' * 100000", "f" + "()" * 100_000),
]


async def case_deep_nesting(run):
    k = await run.kernel()
    seen = []
    for name, source in NESTED:
        log_at = k.log_size()
        obs = await k.run_cell(source, limit=8)
        died = bool(obs["deaths"]) or k.exit_code() is not None
        # An exception in ipykernel's own handler is only logged: find its last line.
        logged = [l for l in k.log_since(log_at).splitlines() if l.split(":")[0].endswith("Error")]
        seen.append({"case": name, "outcome": outcome(obs), "idleAfter": obs["tIdle"], "kernelDied": died,
                     "errors": obs["errors"], "kernelLogError": logged[-1][:200] if logged else None})
        if died or not obs["idle"]:  # go on with a fresh kernel
            await k.stop()
            k = await run.kernel()
    works, _ = await k.answers()

    def brief(s):
        if s["kernelDied"]:
            return "KERNEL DIED"
        if s["outcome"] == "ok":
            return "ok (valid code)"
        if s["outcome"].startswith("no reply"):
            where = f"; only the kernel log says {s['kernelLogError'].split(':')[0]}" if s["kernelLogError"] else ""
            return f"no execute_reply ever (idle after {s['idleAfter']} s, no error message{where})"
        return s["outcome"].replace("error ", "").split(":")[0]

    line = "; ".join(f"{s['case']}: {brief(s)}" for s in seen)
    return {"outcome": line + f"; the kernel lives after each: {all(not s['kernelDied'] for s in seen)}, works after: {works}",
            "cases": seen, "kernelWorksAfter": works}


async def case_memory_hog(run):
    """Jupyter has no memory limit option. Bounded stand-in: the cell caps its own kernel
    with RLIMIT_AS at its current size + 1 GiB, then hogs 32 MiB at a time (stopping at
    3 GiB even if the limit did not hold), then asks for 2 GiB at once."""
    k = await run.kernel()
    seq = await cells(k, [
        "import resource\n"
        "vm = int([l for l in open('/proc/self/status') if l.startswith('VmSize')][0].split()[1]) * 1024\n"
        "_soft, _hard = resource.getrlimit(resource.RLIMIT_AS)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + 1024**3, _hard))\n"
        "print('limit', (vm + 1024**3) // 2**20, 'MiB of address space; was using', vm // 2**20)",
        "hog = []\nwhile len(hog) < 96:\n    hog.append(bytearray(32 * 1024 * 1024))",
        "n = len(hog) * 32\ndel hog\nn",
        "x = bytearray(2 * 1024**3)",
        "print('still here')\n40 + 2",
        "import resource\nresource.setrlimit(resource.RLIMIT_AS, (_soft, _hard))\n'limit lifted'",
    ], limit=30)
    died = k.exit_code() is not None
    return {
        "outcome": (f"no memory option in Jupyter; under an RLIMIT_AS the cell set itself ({seq[0]['stdout'].strip()}):"
                    f" hog: {seq[1]['outcome']}, held {seq[2]['results']} MiB; 2 GiB at once: {seq[3]['outcome']};"
                    f" kernel {'DIED' if died else 'lives'}: {short(seq[4])}. Without a limit nothing stops a hog but the"
                    f" OOM killer (SIGKILL: see that row)"),
        "cells": seq, "kernelDied": died,
    }


async def case_fork_bomb(run):
    """Not a fork bomb: a bounded spawn of 50 forks (children do not fork and exit 2 s after
    the start), to show that nothing in Jupyter limits the count."""
    cap = 50
    k = await run.kernel()
    code = "\n".join([
        "import os, time",
        "start = time.time()",
        "made = 0",
        "try:",
        f"    while made < {cap}:",
        "        pid = os.fork()",
        "        if pid == 0:",
        "            try:",
        "                time.sleep(max(0.0, 2.0 - (time.time() - start)))",
        "            finally:",
        "                os._exit(0)",
        "        made += 1",
        "except OSError as exc:",
        "    print('fork refused after', made, 'children:', exc)",
        "    raise",
        "finally:",
        "    while True:",
        "        try:",
        "            os.waitpid(-1, 0)",
        "        except ChildProcessError:",
        "            break",
        "print('made', made, 'children unhindered')",
    ])
    peak = {"n": 0}
    stop = threading.Event()

    def sample():  # a thread: the client's event loop is busy reading the cell's messages
        while not stop.wait(0.025):
            peak["n"] = max(peak["n"], len(group_members(k.pid)))

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        obs = await k.run_cell(code, limit=20)
    finally:
        stop.set()
        t.join()
    works, _ = await k.answers()
    return {
        "outcome": (f"not run as a real bomb: Jupyter has no process-limit option; a bounded {cap}-fork check: "
                    f"{obs['text']['stdout'].strip()!r} ({outcome(obs)}), up to {peak['n']} processes in the kernel's group;"
                    f" kernel works after: {works}"),
        "cell": trim(obs), "peakGroupMembers": peak["n"], "kernelWorksAfter": works,
    }


SECRETS = [
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AZURE_OPENAI_API_KEY", "PERPLEXITY_COOKIES",
    "PYKERNEL_API_KEY", "PYKERNEL_TOKEN", "PYKERNEL_PASSWORD", "PYKERNEL_SESSION",
    "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "GITHUB_TOKEN", "gh_token", "NPM_TOKEN", "DB_PASSWORD", "MYSQL_PASSWD",
    "GOOGLE_APPLICATION_CREDENTIALS", "SSH_PRIVATE_KEY", "STRIPE_APIKEY", "X-API-KEY", "service_api-key",
    "LC_SECRET_THING", "XDG_TOKEN_FILE", "PYKERNEL_SECRET_SAUCE", "PYKERNEL_DB_PASSWORD",
]


def secret_value(name):
    return "hostile-secret-" + "".join(c if c.isalnum() else "_" for c in name) + "-value"


async def case_secrets(run):
    """The client has secrets in its environment; the kernel inherits it, as KernelManager
    does by default (no env= given)."""
    saved = dict(os.environ)
    os.environ.update({name: secret_value(name) for name in SECRETS})
    try:
        k = await run.kernel()
    finally:
        for name in SECRETS:
            if name not in saved:
                os.environ.pop(name, None)
    gather = "\n".join([
        "import os, subprocess",
        "parts = [repr(dict(os.environ))]",
        "parts.append(open('/proc/self/environ', 'rb').read().decode('utf-8', 'replace'))",
        "parts.append(subprocess.run(['env'], capture_output=True, text=True).stdout)",
        "parts.append(subprocess.run(['sh', '-c', 'cat /proc/$$/environ'], capture_output=True).stdout.decode('utf-8', 'replace'))",
        "print('\\n'.join(parts))",
    ])
    obs = await k.run_cell(gather, limit=20, keep=4 * MB)
    shell = await k.run_cell("!env", limit=20, keep=4 * MB)
    places = {
        "os.environ": obs["text"]["stdout"].split("\n", 1)[0],
        "/proc/self/environ, env, sh child": obs["text"]["stdout"],
        "!env": shell["text"]["stdout"],
    }
    seen_anywhere = [n for n in SECRETS if any(secret_value(n) in text for text in places.values())]
    in_environ = [n for n in SECRETS if secret_value(n) in places["os.environ"]]
    in_shell = [n for n in SECRETS if secret_value(n) in places["!env"]]
    return {
        "outcome": (f"all inherited: {len(in_environ)} of {len(SECRETS)} secret variables (OPENAI_API_KEY,"
                    f" AWS_SECRET_ACCESS_KEY, ...) are in the kernel's os.environ, {len(in_shell)} in !env, {len(seen_anywhere)}"
                    f" somewhere (os.environ, /proc/self/environ, children); jupyter_client filters nothing"),
        "inOsEnviron": len(in_environ), "inBangEnv": len(in_shell), "anywhere": len(seen_anywhere), "checked": len(SECRETS),
    }


HOST_CHILD = r"""
import os, sys, time
from jupyter_client import KernelManager
km = KernelManager(connection_file=os.path.join(os.environ['JUPYTER_RUNTIME_DIR'], f'kernel-host-{os.getpid()}.json'))
km.start_kernel()
kc = km.client()
kc.start_channels()
kc.wait_for_ready(timeout=60)
msg_id = kc.execute("import subprocess\np = subprocess.Popen(['sleep', '600'])\np.pid")
grandchild = None
deadline = time.time() + 30
while grandchild is None and time.time() < deadline:
    msg = kc.get_iopub_msg(timeout=30)
    if msg['parent_header'].get('msg_id') == msg_id and msg['msg_type'] == 'execute_result':
        grandchild = int(msg['content']['data']['text/plain'])
print(km.provisioner.process.pid, grandchild, flush=True)
how = sys.argv[1]
if how == 'wait':
    time.sleep(120)  # until signalled; bounded so it can never linger
elif how == 'exit':
    sys.exit(0)  # natural end without shutdown_kernel()
elif how == 'throw':
    raise RuntimeError('uncaught')
"""


async def case_host_ends(run):
    """A client process starts a kernel (which starts a `sleep 600`) and ends: SIGKILL,
    SIGTERM, a natural end and an uncaught exception, none calling shutdown_kernel().
    Is the kernel, and its child, still alive 12 s later?"""
    endings = [("SIGKILL", "wait", signal.SIGKILL), ("SIGTERM", "wait", signal.SIGTERM),
               ("natural end", "exit", None), ("uncaught exception", "throw", None)]

    async def one(name, how, sig):
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", HOST_CHILD, how, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        run.leftover_pids.add(proc.pid)
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            kernel, grandchild = (int(x) for x in line.split())
        except Exception as e:
            proc.kill()
            await proc.wait()
            return name, {"error": f"the client did not report its kernel: {type(e).__name__}: {e}"}
        run.kernel_pgids.add(kernel)
        run.leftover_pids.update((kernel, grandchild))
        state = {}
        if sig is not None:
            proc.send_signal(sig)
        # Polled from the signal (or from the report, for the endings the client does itself).
        t0 = now()
        ended = None
        while now() - t0 < 12:
            if ended is None and proc.returncode is not None:
                ended = now() - t0
            if ended is not None and not alive(kernel) and not alive(grandchild):
                break
            await asyncio.sleep(0.05)
            if proc.returncode is None:
                try:
                    await asyncio.wait_for(proc.wait(), 0.001)
                except asyncio.TimeoutError:
                    pass
            if ended is not None and "kernelGone" not in state and not alive(kernel):
                state["kernelGone"] = now() - t0
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        gone = state.get("kernelGone")
        conn_file = os.path.join(run.runtime_dir, f"kernel-host-{proc.pid}.json")
        return name, {"clientExit": proc.returncode, "clientEndedAfter": secs(ended), "kernelGoneAfter": secs(gone),
                      "kernelAliveAfter12s": alive(kernel), "childAliveAfter12s": alive(grandchild),
                      "connectionFileLeft": os.path.exists(conn_file),
                      "kernelStderr": (await proc.stderr.read(4000)).decode("utf-8", "replace")[-600:]}

    results = dict(await asyncio.gather(*(one(*e) for e in endings)))
    parts = []
    for name, r in results.items():
        if "error" in r:
            parts.append(f"{name}: {r['error']}")
            continue
        kernel = "kernel ALIVE after 12 s" if r["kernelAliveAfter12s"] else f"kernel gone within {r['kernelGoneAfter']:.1f} s"
        child = "its `sleep 600` child LEFT RUNNING (reparented)" if r["childAliveAfter12s"] else "its child gone"
        conn = ", its connection file (with the HMAC key) left on disk" if r["connectionFileLeft"] else ""
        parts.append(f"{name}: {kernel}, {child}{conn}")
    return {"outcome": "; ".join(parts) + " (ipykernel's parent poller exits when its parent pid changes; nothing kills its children)",
            "endings": results}


CASES = [
    # name, docs/reliability.md row, function, overall limit (s)
    ("flood", "1 GB printed", case_flood, 150),
    ("line_50mb", "50 MB line without newline", case_line_50mb, 90),
    ("tiny_writes", "1,000,000 one-byte writes", case_tiny_writes, 90),
    ("binary_fd", "binary bytes / invalid UTF-8 on fd 1 and 2", case_binary_fd, 45),
    ("surrogates_nul", "lone surrogates, NUL bytes", case_surrogates_nul, 90),
    ("print_then_fd", "print then `os.write(1)`", case_print_then_fd, 60),
    ("os_exit", "`os._exit(n)`, SIGKILL, segfault", case_os_exit, 75),
    ("sigkill", "`os._exit(n)`, SIGKILL, segfault", case_sigkill, 75),
    ("segfault", "`os._exit(n)`, SIGKILL, segfault", case_segfault, 75),
    ("stdout_close", "`sys.stdout.close()`, `sys.stdout = 42`", case_stdout_close, 60),
    ("stdout_42", "`sys.stdout.close()`, `sys.stdout = 42`", case_stdout_42, 60),
    ("close_fd1", "`os.close(1)`, `os.close(0)`", case_close_fd1, 75),
    ("close_fd0", "`os.close(1)`, `os.close(0)`", case_close_fd0, 90),
    ("sigint_ignored", "`SIGINT` ignored then a loop; a C loop holding the GIL", case_sigint_ignored, 75),
    ("c_loop", "`SIGINT` ignored then a loop; a C loop holding the GIL", case_c_loop, 75),
    ("fork", "`fork()` without exec", case_fork, 60),
    ("children_200", "200 children left running", case_children, 90),
    ("daemon_thread", "a daemon thread printing after its cell", case_daemon_thread, 45),
    ("protocol_text", "text that looks like protocol frames, on fd 1 or via C", case_protocol_text, 45),
    ("forged_messages", "forged frames written to the private protocol pipes", case_forged_messages, 45),
    ("inherited_fds", "host descriptors without close-on-exec", case_inherited_fds, 45),
    ("source_100mb", "a 100 MB cell source", case_source_100mb, 200),
    ("deep_nesting", "deeply nested code", case_deep_nesting, 150),
    ("memory_hog", "memory hog with `memoryLimitBytes`", case_memory_hog, 90),
    ("fork_bomb", "fork bomb with `maxProcesses`", case_fork_bomb, 45),
    ("secrets", "secrets in the host environment", case_secrets, 45),
    ("host_ends", "host ends", case_host_ends, 110),
]


# ---------------------------------------------------------------------------------------
# Report


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def write_reports(report, name):
    os.makedirs(RESULTS_DIR, exist_ok=True)
    with open(os.path.join(RESULTS_DIR, f"{name}.json"), "w") as f:
        json.dump(report, f, indent=1, ensure_ascii=True, default=str)
        f.write("\n")
    lines = [
        "# Hostile cases against Jupyter (ipykernel via jupyter_client)",
        "",
        f"- date: {report['date']}",
        f"- ipykernel {report['versions']['ipykernel']}, jupyter_client {report['versions']['jupyter_client']},"
        f" Python {report['versions']['python']} (`{report['versions']['executable']}`)",
        f"- machine: {report['machine']['cpus']} CPUs, {report['machine']['memGiB']} GiB; load average"
        f" {' '.join(report['machine']['loadStart'])} at start, {' '.join(report['machine']['loadEnd'])} at end",
        f"- run: {report['runSeconds']} s; `bench/.venv-jupyter/bin/python bench/jupyter_hostile.py`"
        + (f" --only {' '.join(report['only'])}" if report["only"] else ""),
        "- client: an `AsyncIOLoopKernelManager` (as Jupyter Server uses: its restarter restarts a dead kernel) and its"
        " client; each case on a fresh kernel; the kernel inherits the client's environment (the default)",
        f"- scale: the 1 GiB flood ran at {report['scale']['floodMiB']} MiB (scaled down only if memory is short)"
        if report["scale"]["floodMiB"] else "- the flood case did not run",
        "",
        "| case | docs/reliability.md row | observed | s |",
        "|---|---|---|---|",
    ]
    for c in report["cases"]:
        text = str(c["outcome"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {c['name']} | {c['row']} | {text} | {c['seconds']} |")
    if report.get("sweptAtEnd"):
        lines += ["", f"Processes the final sweep had to kill: {report['sweptAtEnd']}"]
    with open(os.path.join(RESULTS_DIR, f"{name}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


async def main(args):
    import ipykernel
    import jupyter_client

    run = Run(args)
    # Private runtime and IPython dirs: the sweep finds our kernels by path; the user's
    # history database is left alone. Children (kernels, the host-ends clients) inherit them.
    os.environ["JUPYTER_RUNTIME_DIR"] = run.runtime_dir
    os.environ["IPYTHONDIR"] = os.path.join(run.tmp, "ipython")
    selected = [c for c in CASES if not args.only or c[0] in args.only]
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": {"ipykernel": ipykernel.__version__, "jupyter_client": jupyter_client.__version__,
                     "python": platform.python_version(), "executable": sys.executable},
        "machine": {"cpus": os.cpu_count(), "memGiB": round(mem_kib / 1024 / 1024), "uname": " ".join(platform.uname()[:3]),
                    "loadStart": loadavg()},
        "scale": {"floodMiB": None, "orderRuns": args.order_runs},
        "only": args.only,
        "cases": [],
    }
    t_run = now()
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        for name, row, fn, limit in selected:
            print(f"[{now() - t_run:6.1f} s] {name} ...", file=sys.stderr, flush=True)
            t0 = now()
            entry = {"name": name, "row": row}
            try:
                result = await asyncio.wait_for(fn(run), limit)
                entry.update(result)
            except asyncio.TimeoutError:
                entry["outcome"] = f"case exceeded its {limit} s limit: hung; its kernels were killed"
            except Exception as e:
                entry["outcome"] = f"measurement failed: {type(e).__name__}: {e}"
                entry["traceback"] = traceback.format_exc()
            entry["seconds"] = round(now() - t0, 1)
            killed = await run.end_case()
            if killed:
                entry["killedAfterCase"] = killed
            report["cases"].append(entry)
            print(f"    {entry['outcome']}", file=sys.stderr, flush=True)
    finally:
        for k in run.kernels:
            await k.stop()
        report["sweptAtEnd"] = run.sweep()
        shutil.rmtree(run.tmp, ignore_errors=True)
        report["scale"]["floodMiB"] = getattr(run, "flood_mib_used", None)
        report["runSeconds"] = round(now() - t_run, 1)
        report["machine"]["loadEnd"] = loadavg()
        write_reports(report, args.out or ("jupyter-hostile-only" if args.only else "jupyter-hostile"))
    return report


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these cases (see --list)")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--out", help="report name under bench/results (default jupyter-hostile)")
    p.add_argument("--flood-mib", type=int, default=1024, help="size of the 1 GiB flood (MiB; scaled down if memory is short)")
    p.add_argument("--flood-limit", type=float, default=120, help="seconds the flood cell may take")
    p.add_argument("--source-limit", type=float, default=60, help="seconds each large cell source may take")
    p.add_argument("--order-runs", type=int, default=10, help="runs of the print/os.write ordering cell")
    args = p.parse_args()
    names = [c[0] for c in CASES]
    if args.list:
        print("\n".join(f"{c[0]:16} {c[1]}" for c in CASES))
        sys.exit(0)
    unknown = [n for n in args.only or [] if n not in names]
    if unknown:
        p.error(f"unknown case(s) {unknown}; known: {', '.join(names)}")
    return args


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
