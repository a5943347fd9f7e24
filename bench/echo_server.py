"""The floor: a minimal NDJSON server over pipes, run as `python -u echo_server.py`.

One request per line on stdin, answers on stdout, the same framing as pykernel's runner
but nothing else: no output capture, no code execution. Requests:
  {"type":"execute","id"}              -> {"type":"done","id","status":"ok"}
  {"type":"sleep","id","seconds"}      -> {"type":"started","id"}, sleeps;
                                          SIGINT -> {"type":"done","id","cancelled":true}
  {"type":"frames","id","n","b64"}     -> n display frames, then done
  {"type":"exit"}                      -> exits
"""
import json
import sys
import time

read = sys.stdin.buffer.readline
out = sys.stdout.buffer


def send(obj):
    out.write(json.dumps(obj).encode() + b"\n")


while True:
    line = read()
    if not line:
        break
    msg = json.loads(line)
    kind = msg.get("type")
    rid = msg.get("id")
    if kind == "exit":
        break
    if kind == "sleep":
        try:
            send({"type": "started", "id": rid})
            time.sleep(msg.get("seconds", 30))
            send({"type": "done", "id": rid, "status": "ok", "cancelled": False})
        except KeyboardInterrupt:
            send({"type": "done", "id": rid, "status": "error", "cancelled": True})
        continue
    if kind == "frames":
        bundle = {"image/png": msg["b64"]}
        for _ in range(msg["n"]):
            send({"type": "display", "id": rid, "bundle": bundle})
    send({"type": "done", "id": rid, "status": "ok"})
