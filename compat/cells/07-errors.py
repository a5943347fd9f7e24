# Errors an agent runs into: names, arithmetic, syntax, and errors after output.
# compat: ci

# %% name-error
undefined_variable + 1

# %% zero-division
total = 10
count = 0
total / count

# %% syntax-error
def broken(:
    return 1

# %% indentation-error
if True:
print("not indented")

# %% error-after-print
print("loading data...")
raise ValueError("expected 3 columns, got 2")

# %% error-in-function
def parse(record):
    return record["id"]

parse({"name": "x"})

# %% import-error
import not_a_real_module_xyz

# %% assert
assert 1 + 1 == 3, "arithmetic is broken"

# %% sys-exit
import sys
sys.exit(1)

# %% after-exit
"still here"
