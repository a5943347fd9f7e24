# IPython.display as LLM-written code uses it: HTML, Markdown, Image, display(), updates
# and clear_output (the test venv has IPython installed).
# compat: ci

# %% imports
from IPython.display import display, HTML, Markdown, Image, clear_output
import io

# %% html
display(HTML("<h3>Report</h3><p>All <b>3</b> checks passed.</p>"))

# %% markdown
display(Markdown("## Summary\n\n- rows: **120**\n- columns: 8"))

# %% html-result
HTML("<table><tr><td>a</td><td>1</td></tr></table>")

# %% display-several
display("first", 2, [3, 4])
print("after the displays")

# %% image-from-bytes
import matplotlib.pyplot as plt
buf = io.BytesIO()
fig, ax = plt.subplots(figsize=(3, 2), dpi=100)
ax.plot([0, 1], [1, 0])
fig.savefig(buf, format="png")
plt.close(fig)
png = buf.getvalue()
display(Image(data=png))

# %% image-result
Image(data=png, width=200)

# %% image-file
with open("chart.png", "wb") as f:
    f.write(png)
Image(filename="chart.png")

# %% dataframe-display
import pandas as pd
frame = pd.DataFrame({"metric": ["precision", "recall"], "value": [0.91, 0.87]})
display(frame)
print("done")

# %% display-update
handle = display("working...", display_id=True)
for step in range(3):
    handle.update(f"step {step + 1} of 3")

# %% update-display-by-id
from IPython.display import update_display
display(Markdown("loading"), display_id="status")
update_display(Markdown("**loaded**"), display_id="status")

# %% clear-output-loop
import time
for i in range(3):
    clear_output(wait=True)
    print(f"epoch {i + 1}/3")
    time.sleep(0.01)

# %% repr-html-object
class Badge:
    def __init__(self, label):
        self.label = label
    def _repr_html_(self):
        return f"<span class='badge'>{self.label}</span>"
    def __repr__(self):
        return f"Badge({self.label!r})"

Badge("passing")

# %% display-repr-html-object
display(Badge("failing"))

# %% ipython-display-json
from IPython.display import JSON
JSON({"a": 1, "b": [1, 2]})
