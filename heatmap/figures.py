"""Plotly figures for the managers' pages: rows in, figure out.

Pure functions (no database, no request), so each figure is testable on its own.
The pages embed ``figure.to_json()`` and draw it with the plotly.js we serve.
"""

import json
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from coordination.selectors import ProjectLoad
from heatmap.health import DailySeries
from heatmap.selectors import Heatmap

ROOT_ID = "/"  # no claimed path is absolute, so this id never collides with a node
FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 13}
HEAT = "YlOrRd"

# Crashes red, clean exits green: the split a manager looks for first.
REASON_COLOURS = {
    "expired": "#d62728",
    "agent_ended": "#2ca02c",
    "released": "#1f77b4",
    "overridden": "#9467bd",
    "issue_closed": "#7f7f7f",
    "worktree_unresolved": "#8c564b",
}
SERIES_COLOURS = {"rejected": "#ff7f0e", "forced": "#d62728", "WIP-cap denials": "#bcbd22"}


def as_data(figure: go.Figure) -> dict[str, Any]:
    """The figure as plain JSON data, for ``json_script`` (plotly's encoder handles
    its own types; Django's would not)."""
    data: dict[str, Any] = json.loads(figure.to_json())
    return data


def layout(**extra: object) -> dict[str, object]:
    return {
        "template": "plotly_white",
        "font": FONT,
        "margin": {"l": 40, "r": 16, "t": 40, "b": 40},
        "legend": {"orientation": "h", "y": -0.2, "traceorder": "normal"},
        **extra,
    }


def count_axis(largest: int) -> dict[str, object]:
    """An axis of counts: whole numbers only (a step of 1 while the counts are small)."""
    axis: dict[str, object] = {"rangemode": "tozero", "tickformat": ",d"}
    if largest <= 8:
        axis["dtick"] = 1
    return axis


def treemap(heatmap: Heatmap, *, root_label: str, drill_url: Callable[[str], str]) -> go.Figure:
    """The prefixes as a treemap, sized and coloured by count.

    ``customdata`` holds, per tile, the page to load when it is clicked: a directory
    drills into itself, the root goes one level up, a file goes nowhere.
    """
    parent_prefix = heatmap.prefix.rpartition("/")[0] if heatmap.prefix else None
    ids, labels, parents, values, links = (
        [ROOT_ID],
        [root_label],
        [""],
        [heatmap.total],
        [drill_url(parent_prefix) if parent_prefix is not None else ""],
    )
    for node in heatmap.nodes:
        parent, _, name = node.path.rpartition("/")
        ids.append(node.path)
        labels.append(f"{name}/" if node.is_dir else name)
        parents.append(parent if node.depth > 1 else ROOT_ID)
        values.append(node.count)
        links.append(drill_url(node.path) if node.is_dir else "")
    deepest = max((node.count for node in heatmap.nodes), default=1)
    figure = go.Figure(
        go.Treemap(
            ids=ids,
            labels=labels,
            parents=parents,
            values=values,
            customdata=links,
            branchvalues="total",
            # The root would dominate the scale; colour it as the coolest tile.
            marker={
                "colors": [0, *values[1:]],
                "colorscale": HEAT,
                "cmin": 0,
                "cmax": deepest,
                "showscale": True,
                "colorbar": {"title": {"text": "events"}},
            },
            texttemplate="<b>%{label}</b><br>%{value}",
            hovertemplate="<b>%{id}</b><br>%{value} events<extra></extra>",
            maxdepth=heatmap.depth + 1,
            pathbar={"visible": False},
        )
    )
    figure.update_layout(**layout(margin={"l": 4, "r": 4, "t": 4, "b": 4}, height=520))
    return figure


def daily_bars(
    daily: DailySeries, *, title: str, colours: dict[str, str], height: int = 300
) -> go.Figure:
    """One stacked bar per day, a segment per series."""
    figure = go.Figure()
    for name, values in daily.series.items():
        figure.add_bar(
            x=[day.isoformat() for day in daily.days],
            y=values,
            name=name,
            marker_color=colours.get(name),
        )
    largest = max((sum(day) for day in zip(*daily.series.values(), strict=True)), default=0)
    figure.update_layout(
        **layout(
            title={"text": title, "x": 0, "font": {"size": 15}},
            barmode="stack",
            height=height,
            xaxis={"type": "date", "tickformat": "%b %d"},
            yaxis=count_axis(largest),
        )
    )
    return figure


def wip_load(loads: list[ProjectLoad]) -> go.Figure:
    """Live leases per project against its WIP cap (stale leases apart)."""
    keys = [load.key for load in loads]
    widest = max((max(load.live + load.stale, load.limit) for load in loads), default=0)
    figure = go.Figure()
    figure.add_bar(
        y=keys,
        x=[load.live for load in loads],
        name="live leases",
        orientation="h",
        marker_color="#1f77b4",
    )
    figure.add_bar(
        y=keys,
        x=[load.stale for load in loads],
        name="stale (holder dead)",
        orientation="h",
        marker_color="#c7c7c7",
    )
    figure.add_scatter(
        y=keys,
        x=[load.limit for load in loads],
        name="WIP cap",
        mode="markers",
        marker={"symbol": "line-ns-open", "size": 26, "color": "#d62728", "line": {"width": 3}},
    )
    figure.update_layout(
        **layout(
            title={
                "text": "Active leases per project against the WIP cap",
                "x": 0,
                "font": {"size": 15},
            },
            barmode="stack",
            height=120 + 40 * len(loads),
            legend={"orientation": "h", "y": -0.25, "traceorder": "normal"},
            # Room past the largest cap, so its marker is not cut at the edge.
            xaxis={**count_axis(widest), "range": [0, widest + 0.6]},
            yaxis={"autorange": "reversed"},
        )
    )
    return figure
