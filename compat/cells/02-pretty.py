# Values an agent leaves as a cell's last expression: how they read back.
# compat: ci

# %% dict-10-keys
{f"key_{i}": i * 100 for i in range(10)}

# %% list-400
list(range(400))

# %% nested
config = {
    "model": {"name": "resnet50", "layers": [64, 128, 256, 512], "dropout": 0.25},
    "training": {"epochs": 10, "batch_size": 32, "optimizer": {"type": "adam", "lr": 0.001}},
    "data": ["train.csv", "valid.csv", "test.csv"],
}
config

# %% set-of-strings
{"banana", "apple", "cherry", "date"}

# %% set-of-ints
set([5, 3, 9, 1, 3, 5])

# %% multiline-string
text = "first line\nsecond line\nthird line"
text

# %% dataclass
from dataclasses import dataclass

@dataclass
class Task:
    title: str
    done: bool = False

Task("write tests")

# %% list-of-dicts
[{"id": i, "name": f"user{i}", "email": f"user{i}@example.com", "active": i % 2 == 0} for i in range(4)]

# %% underscore-len
len(_)

# %% semicolon
x = 41
x + 1;

# %% underscore-after-semicolon
_

# %% function-object
def greet(name):
    return f"hello {name}"
greet

# %% generator
(n * n for n in range(3))

# %% class-instance
class Plain:
    pass

Plain()

# %% custom-repr
class Money:
    def __init__(self, cents):
        self.cents = cents
    def __repr__(self):
        return f"Money({self.cents / 100:.2f})"

[Money(150), Money(99)]
