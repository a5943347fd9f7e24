# Plots as an agent makes them: with and without plt.show(), subplots, a pandas plot,
# savefig to a file, and a higher savefig.dpi.
# compat: ci

# %% imports
%matplotlib inline
import matplotlib.pyplot as plt
import numpy as np
x = np.linspace(0, 10, 200)

# %% plot-no-show
plt.plot(x, np.sin(x))

# %% plot-show
plt.plot(x, np.cos(x), label="cos")
plt.title("Cosine")
plt.legend()
plt.show()

# %% subplots
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
axes[0].hist(np.sin(x * 3), bins=20)
axes[1].scatter(x[::10], np.cos(x[::10]))
fig.tight_layout()

# %% figure-object
fig

# %% two-figures
for k in (1, 2):
    plt.figure(figsize=(4, 3))
    plt.plot(x, np.sin(k * x))
    plt.title(f"k={k}")
plt.show()

# %% savefig-file
import os
fig, ax = plt.subplots()
ax.bar(["a", "b", "c"], [3, 7, 5])
fig.savefig("bars.png")
plt.close(fig)
print(os.path.exists("bars.png"), os.path.getsize("bars.png") > 1000)

# %% pandas-plot
import pandas as pd
sales = pd.DataFrame({"month": ["Jan", "Feb", "Mar", "Apr"], "revenue": [120, 135, 160, 150]})
sales.plot(x="month", y="revenue", kind="bar", title="Revenue")

# %% savefig-dpi
plt.rcParams["savefig.dpi"] = 200
plt.plot([1, 2, 3], [2, 4, 1])
plt.show()

# %% no-figure
plt.close("all")
"no figure left"
