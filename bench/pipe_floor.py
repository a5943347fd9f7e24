"""The bare-pipe floor: prints lines (or one line) to stdout for Node to read.

Usage: python [-u] pipe_floor.py lines|oneline TOTAL_BYTES
Writes "R\n" first, waits for one line on stdin (the go signal, so interpreter start-up
is not timed), then prints TOTAL_BYTES: 100-byte lines (99 chars + newline) with print(),
or one line of TOTAL_BYTES-1 chars plus its newline.
"""
import sys

mode, total = sys.argv[1], int(sys.argv[2])
sys.stdout.write("R\n")
sys.stdout.flush()
sys.stdin.readline()
if mode == "lines":
    line = "x" * 99
    for _ in range(total // 100):
        print(line)
else:
    print("x" * (total - 1))
sys.stdout.flush()
