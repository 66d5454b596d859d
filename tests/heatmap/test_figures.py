"""heatmap/figures.py on its own: rows in, plotly figure out; no HTTP, no database."""

import json
from datetime import UTC, date, datetime, timedelta

import plotly.graph_objects as go

from coordination.selectors.dashboard import ProjectLoad
from heatmap import figures
from heatmap.health import DailySeries
from heatmap.selectors import Heatmap, roll_up

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def heatmap(
    rows: list[tuple[str, bool, int]], *, prefix: str = "", depth: int = 2, mode: str = "claims"
) -> Heatmap:
    """A heatmap as ``code_heatmap`` builds it, from ``(head, deeper, count)`` rows."""
    total, nodes = roll_up(rows, base=len(prefix.split("/")) if prefix else 0)
    return Heatmap(
        mode=mode,  # type: ignore[arg-type]
        since=T0,
        until=T0 + timedelta(days=1),
        prefix=prefix,
        depth=depth,
        project=None,
        total=total,
        nodes=nodes,
    )


def drill(prefix: str) -> str:
    return f"?prefix={prefix}"


ROWS = [("src/api", True, 3, 3), ("src/web", True, 1, 1), ("README.md", False, 2, 1)]


def test_treemap_tiles_are_the_root_then_each_prefix_sized_by_its_count():
    (trace,) = figures.treemap(heatmap(ROWS), root_label="acme", drill_url=drill).data
    assert trace.type == "treemap" and trace.branchvalues == "total"
    # The hottest first, as the aggregation orders its nodes.
    assert trace.ids == ("/", "src", "src/api", "README.md", "src/web")
    assert trace.labels == ("acme", "src/", "api/", "README.md", "web/")
    assert trace.parents == ("", "/", "src", "/", "src")
    assert trace.values == (6, 4, 3, 2, 1)
    assert trace.maxdepth == 3  # the root and two levels


def test_a_directory_drills_into_itself_a_file_goes_nowhere_the_root_goes_up():
    top = figures.treemap(heatmap(ROWS), root_label="acme", drill_url=drill).data[0]
    links = dict(zip(top.ids, top.customdata, strict=True))
    assert links == {
        "/": "",  # already at the top
        "src": "?prefix=src",
        "README.md": "",
        "src/api": "?prefix=src/api",
        "src/web": "?prefix=src/web",
    }
    below = heatmap([("src/api/views.py", False, 2, 1)], prefix="src/api", depth=1)
    inner = figures.treemap(below, root_label="src/api", drill_url=drill).data[0]
    assert inner.customdata[0] == "?prefix=src"  # one level up
    assert inner.parents == ("", "/")
    one_down = heatmap([("src/api", True, 1, 1)], prefix="src", depth=1)
    assert figures.treemap(one_down, root_label="src", drill_url=drill).data[0].customdata[0] == (
        "?prefix="  # up from a top-level directory: the root
    )


def test_the_treemap_colours_each_tile_by_its_own_heat_not_its_size():
    # src/ holds 4 claims on 4 files: 1 per file, as cool as src/api (3 on 3) and
    # src/web; README.md (2 claims on itself) is the hottest tile.
    marker = figures.treemap(heatmap(ROWS), root_label="acme", drill_url=drill).data[0].marker
    assert marker.colors == (0, 1, 1, 2, 1)
    assert (marker.cmin, marker.cmax) == (0, 2)


def test_a_big_directory_of_cold_files_is_cooler_than_one_hot_file():
    rows = [("big", True, 10, 10), ("hot.py", False, 6, 1)]
    colours = dict(
        zip(
            *[
                (t.ids, t.marker.colors)
                for t in figures.treemap(heatmap(rows), root_label="acme", drill_url=drill).data
            ][0],
            strict=True,
        )
    )
    assert colours["big"] == 1 and colours["hot.py"] == 6


def test_claims_and_contention_have_their_own_palette_and_words():
    claims = figures.treemap(heatmap(ROWS), root_label="acme", drill_url=drill).data[0]
    contention = figures.treemap(
        heatmap(ROWS, mode="contention"), root_label="acme", drill_url=drill
    ).data[0]
    assert claims.marker.colorscale == go.treemap.Marker(colorscale="Blues").colorscale
    assert contention.marker.colorscale == go.treemap.Marker(colorscale="YlOrRd").colorscale
    assert claims.marker.colorbar.title.text == "claims per file"
    assert contention.marker.colorbar.title.text == "conflicts per file"
    assert "claims" in claims.hovertemplate and "conflicts" in contention.hovertemplate


def test_labels_that_do_not_fit_are_hidden_not_shrunk():
    figure = figures.treemap(heatmap(ROWS), root_label="acme", drill_url=drill)
    assert figure.layout.uniformtext.mode == "hide" and figure.layout.uniformtext.minsize >= 10


def test_an_empty_heatmap_is_a_lone_root():
    trace = figures.treemap(heatmap([]), root_label="acme", drill_url=drill).data[0]
    assert (trace.ids, trace.values, trace.marker.cmax) == (("/",), (0,), 1)


def daily(series: dict[str, list[int]]) -> DailySeries:
    return DailySeries(days=[date(2026, 11, 1), date(2026, 11, 2)], series=series)


def test_daily_bars_stack_one_segment_per_series_in_order_with_its_colour():
    chart = figures.daily_bars(
        daily({"rejected": [1, 0], "forced": [2, 3]}),
        title="Conflicts",
        colours=figures.SERIES_COLOURS,
    )
    assert [(bar.type, bar.name) for bar in chart.data] == [("bar", "rejected"), ("bar", "forced")]
    assert chart.data[0].x == ("2026-11-01", "2026-11-02") and chart.data[1].y == (2, 3)
    assert chart.data[1].marker.color == figures.SERIES_COLOURS["forced"]
    assert chart.layout.barmode == "stack" and chart.layout.title.text == "Conflicts"
    assert chart.layout.xaxis.type == "date"


def test_small_counts_get_whole_number_ticks_large_ones_plotly_s_own():
    small = figures.daily_bars(daily({"n": [3, 5]}), title="", colours={})
    large = figures.daily_bars(daily({"n": [3, 50]}), title="", colours={})
    assert small.layout.yaxis.dtick == 1 and large.layout.yaxis.dtick is None
    assert small.layout.yaxis.tickformat == large.layout.yaxis.tickformat == ",d"


def load(key: str, *, live: int, stale: int, limit: int) -> ProjectLoad:
    return ProjectLoad(pk=1, workspace_id=1, key=key, name=key, limit=limit, live=live, stale=stale)


def test_wip_load_shows_live_and_stale_leases_against_each_cap():
    loads = [load("core", live=2, stale=1, limit=3), load("web", live=1, stale=0, limit=5)]
    chart = figures.wip_load(loads)
    live, stale, cap = chart.data
    assert (live.name, live.orientation, live.y, live.x) == (
        "live leases (red: at its cap)",
        "h",
        ("core", "web"),
        (2, 1),
    )
    assert (stale.name, stale.x) == ("stale (holder dead)", (1, 0))
    assert (cap.type, cap.name, cap.x) == ("scatter", "WIP cap", (3, 5))
    assert chart.layout.xaxis.range == (0, 5.6)  # past the largest cap
    full = figures.wip_load(
        [load("core", live=3, stale=0, limit=3), load("web", live=1, stale=0, limit=5)]
    )
    assert full.data[0].marker.color == (figures.AT_CAP, "#1f77b4")  # the full one stands out
    assert chart.layout.height == 120 + 40 * 2


def test_as_data_is_plain_json_for_the_page():
    figure = figures.daily_bars(daily({"n": [1, 2]}), title="t", colours={})
    data = figures.as_data(figure)
    assert json.loads(json.dumps(data)) == data
    assert data["data"][0]["x"] == ["2026-11-01", "2026-11-02"]
    assert go.Figure(data).data[0].y == (1, 2)  # and plotly reads it back
