"""The chart of a matplotlib figure (docs/charts.md)."""


def figure_chart(fig):
    return None
