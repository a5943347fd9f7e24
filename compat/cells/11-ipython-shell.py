# get_ipython() as libraries and notebook code use it: sympy's init_printing (its
# printers registered with the shell's formatters), printers registered by hand, and
# the shell's execution events.
# compat: ci

# %% sympy-init-printing
import sympy as sp
sp.init_printing()
x, y = sp.symbols("x y")

# %% expression
(x + 1)**2

# %% expanded
sp.expand((x + y)**3)

# %% integral
sp.Integral(sp.sqrt(1 / x), x)

# %% solve
sp.solve(x**2 - 4, x)

# %% matrix
sp.Matrix([[1, 2], [3, x]])

# %% rational-and-float
sp.Rational(1, 3), 1 / 3

# %% builtin-results
42

# %% mixed-dict
{x: 1, "name": "value"}

# %% print-expression
print(sp.factor(x**3 - y**3))

# %% display-expression
display(sp.diff(sp.sin(x) * sp.exp(x), x))

# %% shell-colors
get_ipython().colors

# %% formatter-for-type
class Money:
    def __init__(self, cents):
        self.cents = cents

formatters = get_ipython().display_formatter.formatters
formatters["text/plain"].for_type(Money, lambda m, p, cycle: p.text(f"${m.cents / 100:,.2f}"))
formatters["text/html"].for_type(Money, lambda m: f"<b>${m.cents / 100:,.2f}</b>")
Money(123456)

# %% formatter-pop
formatters["text/html"].pop(Money)
Money(99)

# %% post-run-cell-register
def report(result):
    print("cell done:", "ok" if result.success else type(result.error_in_exec).__name__)

get_ipython().events.register("post_run_cell", report)

# %% post-run-cell-fires
total = sum(range(10))
total

# %% post-run-cell-error
1 / 0

# %% post-run-cell-unregister
get_ipython().events.unregister("post_run_cell", report)
"unregistered"
