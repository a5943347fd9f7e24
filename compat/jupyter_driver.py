"""The Jupyter side of the compat run: each session's cells through a real ipykernel.

    compat/.venv-compat/bin/python compat/jupyter_driver.py < sessions.json

Reads ``{"sessions": [{"name", "cwd", "cells": [{"id", "code"}]}]}`` on stdin. Each session
gets a fresh kernel (a ``KernelManager``, as Jupyter Server starts one: the kernel inherits
this process's environment and runs in the session's ``cwd``), and its cells run in order
as a notebook runs them, with ``allow_stdin=False`` as a frontend without input support.
Prints one JSON line per cell on stdout with what a client observed, raw (run.js
normalizes and compares): the reply's status, error name and value, the stream text, the
result's ``text/plain``, and every display (its MIME types, ``text/plain`` and image sizes).

Every kernel is shut down before exit, also on SIGTERM; IPYTHONDIR points at a private
temporary directory so the user's profile and history are left alone.
"""
import base64
import json
import os
import shutil
import signal
import struct
import sys
import tempfile
import time
from queue import Empty

CELL_LIMIT = float(os.environ.get("PYKERNEL_COMPAT_CELL_TIMEOUT", "60"))
IMAGE_MIMES = ("image/png", "image/jpeg")


def _emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _image_size(mime, data):
    """(width, height) of a base64 PNG or JPEG, or None when it cannot be read."""
    try:
        raw = base64.b64decode(data if isinstance(data, str) else "", validate=False)
    except Exception:
        return None
    if mime == "image/png" and raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
        return struct.unpack(">II", raw[16:24])
    if mime == "image/jpeg" and raw[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(raw):
            if raw[i] != 0xFF:
                return None
            marker = raw[i + 1]
            length = struct.unpack(">H", raw[i + 2 : i + 4])[0]
            if marker in (0xC0, 0xC1, 0xC2):
                h, w = struct.unpack(">HH", raw[i + 5 : i + 9])
                return w, h
            i += 2 + length
    return None


def _bundle(data):
    """What is kept of a MIME bundle: its types, its text/plain, its images' sizes."""
    images = []
    for mime in IMAGE_MIMES:
        if mime in data:
            size = _image_size(mime, data[mime])
            images.append({"mime": mime, "size": list(size) if size else None})
    return {"mimes": sorted(data), "text": data.get("text/plain"), "images": images}


def _run_cell(kc, code):
    msg_id = kc.execute(code, allow_stdin=False, store_history=True)
    cell = {
        "status": None, "ename": None, "evalue": None, "stdout": "", "stderr": "",
        "result": None, "displays": [], "updates": 0, "clears": 0, "outputs": [],
    }
    deadline = time.monotonic() + CELL_LIMIT
    idle = False
    while not idle:
        left = deadline - time.monotonic()
        if left <= 0:
            cell["status"] = "timeout"
            return cell
        try:
            msg = kc.get_iopub_msg(timeout=left)
        except Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        mtype, content = msg["msg_type"], msg["content"]
        if mtype == "status":
            idle = content.get("execution_state") == "idle"
        elif mtype == "stream":
            name = content.get("name")
            if name in ("stdout", "stderr"):
                cell[name] += content.get("text", "")
            cell["outputs"].append(name)
        elif mtype == "execute_result":
            cell["result"] = _bundle(content.get("data", {}))
            cell["outputs"].append("result")
        elif mtype == "display_data":
            cell["displays"].append(_bundle(content.get("data", {})))
            cell["outputs"].append("display")
        elif mtype == "update_display_data":
            cell["updates"] += 1
            cell["outputs"].append("update")
        elif mtype == "clear_output":
            cell["clears"] += 1
            cell["outputs"].append("clear")
        elif mtype == "error":
            cell["ename"], cell["evalue"] = content.get("ename"), content.get("evalue")
            cell["outputs"].append("error")
    try:
        reply = kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
    except Empty:
        cell["status"] = "timeout"
        return cell
    content = reply["content"]
    cell["status"] = content.get("status")
    if cell["status"] == "error" and cell["ename"] is None:
        cell["ename"], cell["evalue"] = content.get("ename"), content.get("evalue")
    return cell


def _run_session(session, live, log):
    from jupyter_client import KernelManager

    km = KernelManager()
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the kernel picks its inline backend, as in a notebook
    # The kernel's own stdout/stderr (its start-up warnings, not its cells' output, which
    # travels over iopub) go to a log whose tail explains a session that failed.
    km.start_kernel(cwd=session["cwd"], env=env, stdout=log, stderr=log)
    live.append(km)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        for cell in session["cells"]:
            t0 = time.monotonic()
            out = _run_cell(kc, cell["code"])
            out.update(session=session["name"], id=cell["id"], ms=round((time.monotonic() - t0) * 1000, 1))
            _emit(out)
            if out["status"] == "timeout":
                km.interrupt_kernel()
                time.sleep(1)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        live.remove(km)


def _main():
    spec = json.load(sys.stdin)
    live = []
    private = tempfile.mkdtemp(prefix="pykernel-compat-jupyter-")
    os.environ["IPYTHONDIR"] = os.path.join(private, "ipython")
    os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(private, "runtime")

    def _on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _on_term)
    try:
        for session in spec["sessions"]:
            log_path = os.path.join(private, f"kernel-{session['name']}.log")
            with open(log_path, "wb") as log:
                try:
                    _run_session(session, live, log)
                except Exception as e:
                    with open(log_path, "rb") as f:
                        tail = f.read()[-1500:].decode("utf-8", "replace")
                    _emit({"session": session["name"], "sessionError": f"{type(e).__name__}: {e}", "kernelLog": tail})
    finally:
        for km in list(live):
            try:
                km.shutdown_kernel(now=True)
            except Exception as e:
                print(f"[compat] could not shut a kernel down: {e}", file=sys.__stderr__)
        shutil.rmtree(private, ignore_errors=True)


if __name__ == "__main__":
    _main()
