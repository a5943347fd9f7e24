# A small agent task end to end: write data, load it, clean it, summarise, save.
# compat: ci

# %% write-csv
import csv, json
from pathlib import Path
rows = [
    ["date", "product", "units", "price"],
    ["2024-03-01", "widget", "3", "9.99"],
    ["2024-03-01", "gadget", "1", "24.50"],
    ["2024-03-02", "widget", "5", "9.99"],
    ["2024-03-03", "gizmo", "", "14.00"],
]
with open("sales.csv", "w", newline="") as f:
    csv.writer(f).writerows(rows)
Path("sales.csv").stat().st_size

# %% load
import pandas as pd
sales = pd.read_csv("sales.csv", parse_dates=["date"])
sales

# %% clean
sales["units"] = sales["units"].fillna(0).astype(int)
sales["revenue"] = sales["units"] * sales["price"]
sales

# %% by-product
by_product = sales.groupby("product")["revenue"].sum().sort_values(ascending=False)
by_product

# %% save-json
Path("report.json").write_text(json.dumps({"total": round(float(sales["revenue"].sum()), 2)}))
print(Path("report.json").read_text())

# %% path-object
Path("reports") / "2024" / "march.csv"

# %% numpy-array
import numpy as np
np.arange(12).reshape(3, 4)

# %% numpy-long
np.arange(2000)

# %% numpy-stats
rng = np.random.default_rng(42)
samples = rng.normal(loc=10, scale=2, size=1000)
round(samples.mean(), 3), round(samples.std(), 3)

