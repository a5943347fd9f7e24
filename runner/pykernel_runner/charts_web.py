"""The chart of a plotly figure or a Vega-Lite spec (docs/charts.md)."""


def bundle_chart(bundle):
    return None
