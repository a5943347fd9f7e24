# An agent explores a small table with pandas: frames, summaries, groupby, a wide frame.
# compat: ci

# %% imports
import pandas as pd
import numpy as np

# %% frame
df = pd.DataFrame({
    "name": ["alice", "bob", "carol", "dave", "erin", "frank"],
    "age": [34, 28, 45, 39, 23, 51],
    "city": ["Paris", "Berlin", "Paris", "Rome", "Berlin", "Paris"],
    "score": [88.5, 92.25, 79.0, 85.75, 95.5, 70.0],
})
df

# %% describe
df.describe()

# %% info
df.info()

# %% groupby-mean
df.groupby("city")["score"].mean()

# %% groupby-agg
summary = df.groupby("city").agg(n=("name", "count"), mean_age=("age", "mean"), best=("score", "max"))
summary

# %% wide-12-columns
wide = pd.DataFrame(np.arange(36).reshape(3, 12), columns=[f"column_{i}" for i in range(12)])
wide

# %% long-200-rows
long = pd.DataFrame({"x": range(200), "y": [i * i for i in range(200)]})
long

# %% print-frame
print(df.to_string(index=False))

# %% print-and-result
print(f"{len(df)} rows, {df['city'].nunique()} cities")
df["score"].mean()

# %% new-column
df["passed"] = df["score"] >= 80
df.loc[:, ["name", "passed"]]

# %% missing-column
df["salary"]

