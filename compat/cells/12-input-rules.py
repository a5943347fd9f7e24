# IPython's input rules: what a cell may hold that is not plain Python, or that IPython
# runs where Python alone would not. One minimal cell each.
# compat: ci

# %% future-late
import math
from __future__ import annotations
def area(r: Radius) -> Area:
    return math.pi * r * r
area.__annotations__

# %% future-kept
def side(x: Length) -> Length:
    return x
side.__annotations__

# %% ipython-display-result
class Badge:
    def _ipython_display_(self):
        print("badge shown by itself")
    def __repr__(self):
        return "Badge()"
Badge()

# %% classic-prompts
>>> values = [3, 1, 2]
>>> for v in sorted(values):
...     print(v)
...
>>> len(values)

# %% ipython-prompts
In [1]: def double(x):
   ...:     return 2 * x
   ...:

In [2]: double(21)

# %% automagic-pwd
pwd

# %% automagic-mkdir
mkdir data

# %% automagic-cd
cd data

# %% automagic-cd-back
cd ..

# %% automagic-shadowed
cd = "a variable"
cd

# %% alias-cat
with open("notes.txt", "w") as f:
    f.write("one\ntwo\n")

# %% alias-cat-run
cat notes.txt

# %% help-missing
no_such_name?

# %% help-function
def greet(name):
    """Say hello."""
    return "hello " + name
greet?

# %% html-cell
%%html
<b>bold</b> text

# %% markdown-cell
%%markdown
# Title
Some *text*.

# %% latex-cell
%%latex
$E = mc^2$

# %% javascript-cell
%%javascript
console.log("hi")

# %% js-cell
%%js
console.log("hi")

# %% svg-cell
%%svg
<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>
