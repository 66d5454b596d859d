"""Plotly figures for the managers' pages: rows in, figure out.

Pure functions (no database, no request), so each figure is testable on its own.
The pages embed ``figure.to_json()`` and draw it with the plotly.js we serve.
"""

import json
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from coordination.selectors.dashboard import ProjectLoad
from heatmap.health import DailySeries
from heatmap.selectors import Heatmap

ROOT_ID = "/"  # no claimed path is absolute, so this id never collides with a node
FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 13}
# One palette and one word per mode, so a glance tells which question the map answers.
PALETTES = {"claims": "Blues", "contention": "YlOrRd"}
NOUNS = {"claims": "claims", "contention": "conflicts"}
HEAT = PALETTES["contention"]

# Crashes red, clean exits green: the split a manager looks for first.
REASON_COLOURS = {
    "expired": "#d62728",
    "agent_ended": "#2ca02c",
    "released": "#1f77b4",
    "overridden": "#9467bd",
    "issue_closed": "#7f7f7f",
    "worktree_unresolved": "#8c564b",
    # Past its project's age cap, its holder live (invariant 17 (stalled is derived)).
    "max_age": "#e377c2",
}
SERIES_COLOURS = {"rejected": "#ff7f0e", "forced": "#d62728", "WIP-cap denials": "#7b3294"}
AT_CAP = "#d62728"  # a project whose live leases reached its WIP cap


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
    """The prefixes as a treemap, sized by count and coloured by each tile's own heat
    (events per file below it, ``Node.heat``), so a hot file outshines a big directory.

    ``customdata`` holds, per tile, the page to load when it is clicked: a directory
    drills into itself, the root goes one level up, a file goes nowhere.
    """
    noun = NOUNS[heatmap.mode]
    parent_prefix = heatmap.prefix.rpartition("/")[0] if heatmap.prefix else None
    ids, labels, parents, values, colours, links = (
        [ROOT_ID],
        [root_label],
        [""],
        [heatmap.total],
        [0.0],  # the outer frame: the coolest colour, so it never competes
        [drill_url(parent_prefix) if parent_prefix is not None else ""],
    )
    for node in heatmap.nodes:
        parent, _, name = node.path.rpartition("/")
        ids.append(node.path)
        labels.append(f"{name}/" if node.is_dir else name)
        parents.append(parent if node.depth > 1 else ROOT_ID)
        values.append(node.count)
        colours.append(round(node.heat, 2))
        links.append(drill_url(node.path) if node.is_dir else "")
    hottest = max(colours[1:], default=0) or 1
    figure = go.Figure(
        go.Treemap(
            ids=ids,
            labels=labels,
            parents=parents,
            values=values,
            customdata=links,
            branchvalues="total",
            marker={
                "colors": colours,
                "colorscale": PALETTES[heatmap.mode],
                "cmin": 0,
                "cmax": hottest,
                "showscale": True,
                "colorbar": {
                    "title": {"text": f"{noun} per file", "side": "right"},
                    "thickness": 14,
                },
                "line": {"width": 1, "color": "#ffffff"},
            },
            texttemplate="<b>%{label}</b><br>%{value}",
            hovertemplate=(
                f"<b>%{{id}}</b><br>%{{value}} {noun}<br>%{{color:.1f}} per file<extra></extra>"
            ),
            tiling={"pad": 2},
            maxdepth=heatmap.depth + 1,
            pathbar={"visible": False},
        )
    )
    figure.update_layout(
        **layout(margin={"l": 4, "r": 4, "t": 4, "b": 4}, height=520),
        # A label that does not fit its tile is hidden, not shrunk to a smudge; the
        # tooltip names the full path.
        uniformtext={"minsize": 11, "mode": "hide"},
        hoverlabel={"bgcolor": "rgba(29, 35, 48, 0.9)", "font": {"color": "#fff"}},
    )
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
        name="live leases (red: at its cap)",
        orientation="h",
        marker_color=[AT_CAP if load.live >= load.limit else "#1f77b4" for load in loads],
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
        marker={"symbol": "line-ns-open", "size": 26, "color": "#1d2330", "line": {"width": 3}},
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
