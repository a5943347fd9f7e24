# IPython habits: magics and shell escapes as agents write them. Not in the CI subset: the
# shell's output (coreutils' messages and column widths) is the machine's, not ours.

# %% pwd
%pwd

# %% autoreload
%load_ext autoreload
%autoreload 2

# %% writefile
%%writefile greet.py
def greet(name):
    return f"hello {name}"

if __name__ == "__main__":
    print(greet("world"))

# %% run
%run greet.py

# %% file-alias
%%file notes.txt
first note
second note

# %% shell-cat
!cat notes.txt

# %% shell-echo
!echo hello from the shell

# %% shell-capture
lines = !ls
sorted(lines)

# %% shell-var-expand
name = "notes.txt"
!wc -l {name}

# %% shell-failing
!ls does-not-exist-here

# %% cd
import os
os.makedirs("sub", exist_ok=True)
%cd sub

# %% cd-back
%cd ..

# %% timeit
%timeit -n1 -r1 sum(range(1000))

# %% time
%time total = sum(range(100_000))

# %% env-set
%env APP_MODE=debug
os.environ["APP_MODE"]

# %% bash-cell
%%bash
echo "from bash"
for i in 1 2 3; do echo "line $i"; done

# %% who
%who

# %% unknown-magic
%notamagic

# %% writefile-append
%%writefile -a notes.txt
third note

