"""The Jupyter side of the benchmark: ipykernel driven by jupyter_client, timed in Python.

Run by bench/run.js with the bench venv's python:
    python jupyter_bench.py '<json config>'
The config names the iteration counts and sizes (see run.js). Prints one JSON object on
stdout: raw samples per metric (milliseconds, MB/s, frames/s, KiB) plus what ran. Each
kernel pid is written to stderr as "#pid N" as soon as it is known, so run.js can kill a
kernel this script failed to shut down. Every kernel is shut down before exit, also on
SIGTERM. A metric that fails is reported as {"error": "..."} and the others still run.
"""
import asyncio
import json
import os
import signal
import sys
import time
import traceback

CONFIG = json.loads(sys.argv[1])
TINY_PNG = CONFIG["png"]
LIVE = []  # (km, kc) pairs not shut down yet


def now():
    return time.perf_counter()


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def pss_kib(pid):
    """Pss from smaps_rollup: shared pages split between the processes that map them."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


async def start(km_cls):
    km = km_cls()
    await km.start_kernel()
    pid = km.provisioner.process.pid if km.provisioner and km.provisioner.process else None
    if pid:
        print(f"#pid {pid}", file=sys.stderr, flush=True)
    kc = km.client()
    kc.start_channels()
    LIVE.append((km, kc))
    await kc.wait_for_ready(timeout=60)
    return km, kc, pid


async def stop(km, kc):
    try:
        kc.stop_channels()
    except Exception:
        pass
    try:
        await km.shutdown_kernel(now=True)
    except Exception:
        pass
    try:
        LIVE.remove((km, kc))
    except ValueError:
        pass


async def run_cell(kc, code, on_iopub=None, timeout=600):
    """Sends `code`, waits for the execute_reply and for iopub's idle: everything received."""
    msg_id = kc.execute(code)
    reply = None
    idle = False
    deadline = now() + timeout
    while not idle:
        msg = await kc.get_iopub_msg(timeout=max(0.01, deadline - now()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        mtype = msg["msg_type"]
        if mtype == "status" and msg["content"]["execution_state"] == "idle":
            idle = True
        elif on_iopub is not None:
            on_iopub(mtype, msg["content"])
    while reply is None:
        m = await kc.get_shell_msg(timeout=max(0.01, deadline - now()))
        if m["parent_header"].get("msg_id") == msg_id:
            reply = m
    return reply


def first_result(results):
    def on(mtype, content):
        if mtype == "execute_result":
            results.append(content["data"].get("text/plain"))
    return on


async def cold_start(km_cls):
    """Spawn -> the `1+1` result, one kernel; returns (ms, km, kc, pid)."""
    t0 = now()
    km, kc, pid = await start(km_cls)
    results = []
    await run_cell(kc, "1+1", first_result(results))
    ms = (now() - t0) * 1000
    if results != ["2"]:
        raise RuntimeError(f"unexpected 1+1 result {results!r}")
    return ms, km, kc, pid


async def main():
    from jupyter_client import AsyncKernelManager
    import ipykernel
    import jupyter_client

    out = {
        "ipykernel": ipykernel.__version__,
        "jupyter_client": jupyter_client.__version__,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "metrics": {},
    }
    m = out["metrics"]

    async def guarded(name, fn):
        try:
            await fn()
        except Exception as e:  # one metric failing must not lose the others
            m[name] = {"error": f"{type(e).__name__}: {e}"}
            traceback.print_exc(file=sys.stderr)

    # Cold start: one discarded warm-up (page cache), then N.
    async def cold():
        samples = []
        for i in range(CONFIG["coldRuns"] + 1):
            ms, km, kc, pid = await cold_start(AsyncKernelManager)
            if i == 0:
                out["kernelArgv"] = km.kernel_spec.argv if km.kernel_spec else None
            else:
                samples.append(ms)
            await stop(km, kc)
        m["coldStartMs"] = samples

    await guarded("coldStartMs", cold)

    # A new session's first pandas cell (lib/pandas.js has pykernel's): a fresh kernel,
    # started as above, then the cell at once. Two times per kernel: ready -> the cell's
    # result, and start_kernel -> that result. One discarded warm-up, then N.
    async def pandas_first_cell():
        cell = CONFIG["pandasCell"]
        ready_ms, total_ms = [], []
        for i in range(CONFIG["pandasRuns"] + 1):
            await asyncio.sleep(CONFIG["shortSettleMs"] / 1000)
            t0 = now()
            km, kc, _ = await start(AsyncKernelManager)
            t1 = now()
            results = []
            reply = await run_cell(kc, cell, first_result(results), timeout=120)
            t2 = now()
            await stop(km, kc)
            if reply["content"].get("status") != "ok" or len(results) != 1 or "0  1" not in (results[0] or ""):
                raise RuntimeError(f"the pandas cell gave {reply['content'].get('status')} {results!r}")
            if i > 0:
                ready_ms.append((t2 - t1) * 1000)
                total_ms.append((t2 - t0) * 1000)
        m["pandasFirstCellMs"] = ready_ms
        m["pandasStartAndCellMs"] = total_ms

    if CONFIG.get("pandasCell"):
        await guarded("pandasFirstCellMs", pandas_first_cell)
        if isinstance(m.get("pandasFirstCellMs"), dict):
            m["pandasStartAndCellMs"] = m["pandasFirstCellMs"]
    else:
        m["pandasFirstCellMs"] = m["pandasStartAndCellMs"] = {"error": CONFIG.get("pandasError") or "pandas not installed"}

    # Idle memory after the pandas cell (lib/pandas.js has pykernel's): idleSessions
    # kernels started at once, the cell run in each, then idleMs idle; VmRSS and Pss of
    # each kernel process (ipykernel is one process). Totals are sums; the ratios divide by
    # one kernel's RSS (the median), as pykernel's.
    idle_keys = ["idleSessionRssKiB", "idleSessionPssKiB", "idleTotalRssKiB", "idleTotalPssKiB", "idleTotalRssRatio", "idleTotalPssRatio"]

    async def pandas_idle_memory():
        cell = CONFIG["pandasCell"]
        n = CONFIG["idleSessions"]
        started = []
        t0 = now()
        try:
            for coro in asyncio.as_completed([start(AsyncKernelManager) for _ in range(n)]):
                started.append(await coro)

            async def run(kc):
                results = []
                reply = await run_cell(kc, cell, first_result(results), timeout=120)
                if reply["content"].get("status") != "ok" or len(results) != 1 or "0  1" not in (results[0] or ""):
                    raise RuntimeError(f"the pandas cell gave {reply['content'].get('status')} {results!r}")

            await asyncio.gather(*[run(kc) for _, kc, _ in started])
            await asyncio.sleep(CONFIG["idleMs"] / 1000)
            rss = [rss_kib(pid) for _, _, pid in started]
            pss = [pss_kib(pid) for _, _, pid in started]
            if None in rss or None in pss:
                raise RuntimeError(f"cannot read the kernels' memory: rss {rss} pss {pss}")
        finally:
            for km_, kc_, _ in started:
                await stop(km_, kc_)
            out["idleMemoryS"] = round(now() - t0, 1)
        one = sorted(rss)[n // 2] if n % 2 else (sorted(rss)[n // 2 - 1] + sorted(rss)[n // 2]) / 2
        m["idleSessionRssKiB"] = rss
        m["idleSessionPssKiB"] = pss
        m["idleTotalRssKiB"] = sum(rss)
        m["idleTotalPssKiB"] = sum(pss)
        m["idleTotalRssRatio"] = sum(rss) / one
        m["idleTotalPssRatio"] = sum(pss) / one

    if CONFIG.get("pandasCell"):
        await guarded("idleSessionRssKiB", pandas_idle_memory)
        if isinstance(m.get("idleSessionRssKiB"), dict):
            for k in idle_keys:
                m[k] = m["idleSessionRssKiB"]
    else:
        for k in idle_keys:
            m[k] = {"error": CONFIG.get("pandasError") or "pandas not installed"}

    # One long-lived kernel for the warm metrics.
    km = kc = pid = None

    async def long_lived():
        nonlocal km, kc, pid
        _, km, kc, pid = await cold_start(AsyncKernelManager)
        await asyncio.sleep(0.2)
        m["rssAfterStartKiB"] = rss_kib(pid)

    await guarded("rssAfterStartKiB", long_lived)
    if kc is None:
        return out

    async def warm():
        for _ in range(CONFIG["warmup"]):
            await run_cell(kc, "1+1")
        samples = []
        cpu0 = time.process_time()
        for _ in range(CONFIG["warmRuns"]):
            results = []
            t0 = now()
            await run_cell(kc, "1+1", first_result(results))
            samples.append((now() - t0) * 1000)
        cpu = time.process_time() - cpu0
        m["warmRoundTripMs"] = samples
        m["hostCpuPerCellUs"] = cpu / CONFIG["warmRuns"] * 1e6

    await guarded("warmRoundTripMs", warm)

    def count_stream(box):
        def on(mtype, content):
            if mtype == "stream":
                box[0] += len(content["text"].encode())
        return on

    async def lines():
        total = CONFIG["streamBytes"]
        code = f"_line = 'x' * 99\nfor _ in range({total // 100}):\n    print(_line)\n"
        rates, cpus = [], []
        for _ in range(CONFIG["streamRuns"]):
            box = [0]
            cpu0 = time.process_time()
            t0 = now()
            await run_cell(kc, code, count_stream(box))
            dt = now() - t0
            cpus.append((time.process_time() - cpu0) * 1000)
            if box[0] != total:
                raise RuntimeError(f"received {box[0]} bytes of {total}")
            rates.append(total / 1e6 / dt)
        m["linesMBps"] = rates
        m["linesHostCpuMs"] = cpus

    await guarded("linesMBps", lines)
    m["rssAfterStreamKiB"] = rss_kib(pid)

    async def one_line():
        total = CONFIG["streamBytes"]
        code = f"print('x' * {total - 1})"
        rates = []
        for _ in range(CONFIG["streamRuns"]):
            box = [0]
            t0 = now()
            await run_cell(kc, code, count_stream(box))
            dt = now() - t0
            if box[0] != total:
                raise RuntimeError(f"received {box[0]} bytes of {total}")
            rates.append(total / 1e6 / dt)
        m["oneLineMBps"] = rates

    await guarded("oneLineMBps", one_line)

    async def frames():
        n = CONFIG["frames"]
        code = (
            "from IPython.display import display\n"
            f"_png = {TINY_PNG!r}\n"
            f"for _ in range({n}):\n"
            "    display({'image/png': _png}, raw=True)\n"
        )
        rates = []
        for _ in range(CONFIG["framesRuns"]):
            box = [0]

            def on(mtype, content):
                if mtype == "display_data" and "image/png" in content["data"]:
                    box[0] += 1

            t0 = now()
            await run_cell(kc, code, on)
            dt = now() - t0
            if box[0] != n:
                raise RuntimeError(f"received {box[0]} frames of {n}")
            rates.append(n / dt)
        m["framesPerS"] = rates

    await guarded("framesPerS", frames)

    async def interrupt():
        samples = []
        for _ in range(CONFIG["interruptRuns"]):
            msg_id = kc.execute("import time\nprint('go', flush=True)\ntime.sleep(10)")
            # Wait for the cell's "go": it is running.
            while True:
                msg = await kc.get_iopub_msg(timeout=30)
                if (
                    msg["parent_header"].get("msg_id") == msg_id
                    and msg["msg_type"] == "stream"
                    and "go" in msg["content"]["text"]
                ):
                    break
            t0 = now()
            await km.interrupt_kernel()
            while True:
                r = await kc.get_shell_msg(timeout=30)
                if r["parent_header"].get("msg_id") == msg_id:
                    break
            samples.append((now() - t0) * 1000)
            if r["content"].get("ename") != "KeyboardInterrupt":
                raise RuntimeError(f"reply was {r['content'].get('status')} {r['content'].get('ename')}")
            # Drain iopub up to idle so the next cell starts clean.
            while True:
                msg = await kc.get_iopub_msg(timeout=30)
                if (
                    msg["parent_header"].get("msg_id") == msg_id
                    and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"
                ):
                    break
            await asyncio.sleep(0.05)
        m["interruptMs"] = samples

    await guarded("interruptMs", interrupt)
    await stop(km, kc)

    async def four():
        samples = []
        for _ in range(CONFIG["fourRuns"]):
            t0 = now()
            started = await asyncio.gather(*[cold_start(AsyncKernelManager) for _ in range(4)])
            samples.append((now() - t0) * 1000)
            for _, k, c, _ in started:
                await stop(k, c)
        m["fourSessionsMs"] = samples

    await guarded("fourSessionsMs", four)
    return out


async def amain():
    task = asyncio.current_task()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await main()
    finally:
        for km, kc in list(LIVE):
            await stop(km, kc)


if __name__ == "__main__":
    try:
        result = asyncio.run(amain())
    except BaseException as e:
        result = {"error": f"{type(e).__name__}: {e}"}
        traceback.print_exc(file=sys.stderr)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
