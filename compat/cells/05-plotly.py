# plotly figures as an agent shows them: fig.show() and a figure as the last expression.
# Not in the CI subset: were pykernel's notebook detection to regress, plotly's default
# renderer would open a browser.

# %% express-show
import plotly.express as px
fig = px.line(x=[1, 2, 3, 4], y=[1, 4, 9, 16], title="squares")
fig.show()

# %% figure-result
fig

# %% graph-objects
import plotly.graph_objects as go
bar = go.Figure(go.Bar(x=["a", "b", "c"], y=[3, 1, 2]))
bar.update_layout(title="counts")
bar.show()

# %% scatter-from-frame
import pandas as pd
points = pd.DataFrame({"x": [1, 2, 3], "y": [3, 1, 2], "group": ["a", "b", "a"]})
px.scatter(points, x="x", y="y", color="group").show()
print("shown")
