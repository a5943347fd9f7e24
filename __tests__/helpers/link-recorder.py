"""A launcher for tests: ``link-recorder.py LOG -- <command...>`` runs the command,
relays this process's stdin to it and its stdout back, and appends each line either way
that starts with ``{"type":"far`` (a launched kernel's link control: the nonce and
token, attach requests and answers) to LOG, after ``>`` (host to far side) or ``<``.
Killing it drops the link as killing an ssh client does, while the command (the far
side) lives on with its pipes closed."""
import os
import subprocess
import sys
import threading

log_path = sys.argv[1]
command = sys.argv[sys.argv.index("--") + 1:]
child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
lock = threading.Lock()


def record(mark, line):
    if line.startswith(b'{"type":"far'):
        with lock, open(log_path, "ab") as log:
            log.write(mark + line)


def pump(source, target, mark):
    line = b""
    skipping = False
    while True:
        data = os.read(source, 1 << 16)
        if not data:
            break
        view = memoryview(data)
        while view:
            try:
                written = os.write(target, view)
            except OSError:
                return
            view = view[written:]
        for piece in data.splitlines(keepends=True):
            if not skipping:
                line += piece
            if piece.endswith(b"\n"):
                if not skipping:
                    record(mark, line)
                line, skipping = b"", False
            elif len(line) > 4096:
                line, skipping = b"", True


def host_to_far():
    pump(0, child.stdin.fileno(), b">")
    child.stdin.close()


threading.Thread(target=host_to_far, daemon=True).start()
pump(child.stdout.fileno(), 1, b"<")
sys.exit(child.wait())
