# Output as agents produce it: print, stderr, progress, shells, input().
# compat: ci

# %% print
print("hello, world")

# %% print-sep-end
print("a", "b", "c", sep=", ", end="!\n")
print("no newline", end="")

# %% stderr
import sys
print("to stdout")
print("to stderr", file=sys.stderr)

# %% unicode
print("naïve café — 日本語 — ✓")

# %% progress-carriage
for pct in (0, 50, 100):
    print(f"\rprogress {pct}%", end="")
print()

# %% os-system
import os
os.system("echo from os.system")

# %% input
name = input("Your name: ")

# %% input-after-print
print("asking...")
answer = input()

# %% indented-cell
    values = [3, 1, 2]
    values.sort()
    values

# %% indented-block
    for v in range(2):
        print("v =", v)
