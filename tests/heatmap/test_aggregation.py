"""The heatmap aggregation against hand-computed counts (runs on SQLite and PostgreSQL)."""

from datetime import timedelta

import pytest

from coordination.errors import InvalidInput
from coordination.models import Project
from heatmap import selectors
from heatmap.paths import path_head
from heatmap.selectors import code_heatmap, colliding_pairs, hottest_paths, roll_up
from tests.heatmap.conftest import T0, WINDOW

pytestmark = pytest.mark.django_db


def counts(heatmap: selectors.Heatmap) -> list[tuple[str, int, int]]:
    return [(node.path, node.count, node.depth) for node in heatmap.nodes]


def test_root_at_depth_two_counts_every_prefix_sorted_by_count(workspace, tree):
    heatmap = code_heatmap(workspace, mode="claims", **WINDOW)
    assert heatmap.total == 7
    assert counts(heatmap) == [
        ("src", 4, 1),
        ("src/api", 3, 2),
        ("README.md", 1, 1),
        ("docs", 1, 1),
        ("docs/a", 1, 2),
        ("src/web", 1, 2),
        ("srcs", 1, 1),
        ("srcs/x.py", 1, 2),
    ]


def test_depth_cuts_the_tree(workspace, tree):
    one = code_heatmap(workspace, mode="claims", depth=1, **WINDOW)
    assert counts(one) == [("src", 4, 1), ("README.md", 1, 1), ("docs", 1, 1), ("srcs", 1, 1)]
    four = code_heatmap(workspace, mode="claims", depth=4, **WINDOW)
    assert ("docs/a/b/c.md", 1, 4) in counts(four)
    assert ("src/api/views.py", 2, 3) in counts(four)


def test_drill_down_matches_whole_segments_only(workspace, tree):
    heatmap = code_heatmap(workspace, mode="claims", prefix="src", **WINDOW)
    assert heatmap.total == 4  # srcs/x.py is not under src
    assert counts(heatmap) == [
        ("src/api", 3, 1),
        ("src/api/views.py", 2, 2),
        ("src/api/auth.py", 1, 2),
        ("src/web", 1, 1),
        ("src/web/app.tsx", 1, 2),
    ]


def test_drill_two_levels_and_into_a_file(workspace, tree):
    api = code_heatmap(workspace, mode="claims", prefix="src/api", **WINDOW)
    assert api.total == 3
    assert counts(api) == [("src/api/views.py", 2, 1), ("src/api/auth.py", 1, 1)]
    file = code_heatmap(workspace, mode="claims", prefix="src/api/views.py", **WINDOW)
    assert file.total == 2 and file.nodes == []


def test_prefix_is_case_sensitive_like_paths(workspace, tree):
    assert code_heatmap(workspace, mode="claims", prefix="SRC", **WINDOW).total == 0


def test_directories_are_told_from_files(workspace, tree):
    heatmap = code_heatmap(workspace, mode="claims", **WINDOW)
    kinds = {node.path: node.is_dir for node in heatmap.nodes}
    # docs/a is cut at the depth but has paths below it; srcs/x.py and README.md do not.
    assert kinds == {
        "src": True,
        "src/api": True,
        "src/web": True,
        "srcs": True,
        "srcs/x.py": False,
        "README.md": False,
        "docs": True,
        "docs/a": True,
    }


def test_window_includes_since_and_excludes_until(workspace, make_issue, add_claim):
    issue = make_issue()
    add_claim(issue, "a/at-since.py", T0)
    add_claim(issue, "a/at-until.py", T0 + timedelta(days=1))
    add_claim(issue, "a/before.py", T0 - timedelta(microseconds=1))
    add_claim(issue, "a/last.py", T0 + timedelta(days=1) - timedelta(microseconds=1))
    heatmap = code_heatmap(workspace, mode="claims", depth=2, **WINDOW)
    assert heatmap.total == 2
    assert sorted(node.path for node in heatmap.nodes if node.depth == 2) == [
        "a/at-since.py",
        "a/last.py",
    ]


def test_claims_mode_counts_released_and_unreleased_claims(workspace, make_issue, add_claim):
    issue = make_issue()
    add_claim(issue, "a/old.py", T0)
    live = add_claim(issue, "a/held.py", T0)
    type(live).objects.filter(pk=live.pk).update(released_at=None, release_reason="")
    assert code_heatmap(workspace, mode="claims", **WINDOW).total == 2


def test_project_filter(workspace, project, make_issue, add_claim, add_conflict):
    other = Project.objects.create(workspace=workspace, key="web", name="Web")
    core_issue, web_issue = make_issue(), make_issue(project=other)
    add_claim(core_issue, "src/a.py", T0)
    add_claim(web_issue, "src/b.py", T0)
    add_claim(web_issue, "web/c.ts", T0)
    add_conflict(web_issue, core_issue, "src/a.py", T0)  # counted for the rejected side
    claims = code_heatmap(workspace, mode="claims", project=other, **WINDOW)
    assert claims.total == 2 and counts(claims)[0] == ("src", 1, 1)
    contention = code_heatmap(workspace, mode="contention", project=project, **WINDOW)
    assert contention.total == 0
    assert code_heatmap(workspace, mode="contention", project=other, **WINDOW).total == 1


def test_modes_count_their_own_events(workspace, make_issue, add_claim, add_conflict):
    mine, theirs = make_issue(), make_issue()
    add_claim(mine, "src/a.py", T0)
    add_conflict(theirs, mine, "src/a.py", T0)
    add_conflict(theirs, mine, "src/a.py", T0 + timedelta(hours=2), forced=True)
    add_conflict(theirs, mine, "docs/x.md", T0)
    contention = code_heatmap(workspace, mode="contention", **WINDOW)
    assert contention.total == 3
    assert counts(contention) == [
        ("src", 2, 1),
        ("src/a.py", 2, 2),
        ("docs", 1, 1),
        ("docs/x.md", 1, 2),
    ]
    assert code_heatmap(workspace, mode="claims", **WINDOW).total == 1


def test_workspace_isolation(workspace, other_workspace, tree, add_claim):
    project = Project.objects.create(workspace=other_workspace, key="x", name="X")
    foreign = project.issues.create(workspace=other_workspace, title="Foreign")
    add_claim(foreign, "src/api/views.py", T0)
    assert code_heatmap(workspace, mode="claims", **WINDOW).total == 7
    assert counts(code_heatmap(other_workspace, mode="claims", **WINDOW)) == [
        ("src", 1, 1),
        ("src/api", 1, 2),
    ]


def test_counted_in_one_query_however_many_events(
    workspace, make_issue, add_claim, django_assert_num_queries
):
    issue = make_issue()
    for index in range(60):
        add_claim(issue, f"src/m{index % 7}/f{index}.py", T0)
    with django_assert_num_queries(1):
        heatmap = code_heatmap(workspace, mode="claims", **WINDOW)
    assert heatmap.total == 60 and len(heatmap.nodes) == 1 + 7


def test_hottest_paths_and_colliding_pairs(workspace, make_issue, add_conflict):
    a, b, c = make_issue(title="A"), make_issue(title="B"), make_issue(title="C")
    add_conflict(a, b, "src/x.py", T0)
    add_conflict(a, b, "src/y.py", T0, forced=True)
    add_conflict(c, b, "src/x.py", T0)
    add_conflict(c, b, "lib/z.py", T0 + timedelta(days=2))  # outside the window
    assert hottest_paths(workspace, mode="contention", **WINDOW) == [
        ("src/x.py", 2),
        ("src/y.py", 1),
    ]
    pairs = colliding_pairs(workspace, **WINDOW)
    assert [(p.rejected_title, p.holding_title, p.count, p.forced) for p in pairs] == [
        ("A", "B", 2, 1),
        ("C", "B", 1, 0),
    ]


def test_normalise_prefix_spells_it_like_a_claim():
    assert selectors.normalise_prefix("./src//api/") == "src/api"
    assert selectors.normalise_prefix("") == ""
    with pytest.raises(InvalidInput):
        selectors.normalise_prefix("../etc")


def test_roll_up_sums_deep_rows_into_their_ancestors():
    total, nodes = roll_up([("a/b", True, 3, 2), ("a/c", False, 2, 1), ("a", False, 1, 1)], base=0)
    assert total == 6
    assert [(n.path, n.count, n.is_dir, n.files) for n in nodes] == [
        ("a", 6, True, 4),
        ("a/b", 3, True, 2),
        ("a/c", 2, False, 1),
    ]
    assert nodes[1].heat == 1.5  # 3 events over its 2 files


def test_a_node_s_files_are_the_distinct_paths_under_it(workspace, tree):
    nodes = {n.path: n for n in code_heatmap(workspace, mode="claims", depth=1, **WINDOW).nodes}
    # src/api/views.py twice, src/api/auth.py, src/web/app.tsx: 4 claims on 3 files.
    assert (nodes["src"].count, nodes["src"].files) == (4, 3)


def test_path_head_cuts_whole_segments():
    assert path_head("a/b/c.py", 2) == "a/b"
    assert path_head("a", 3) == "a"


def test_a_directory_claim_counts_once_at_its_directory(workspace, make_issue, add_claim):
    """Invariant 11 (overlap): ``src/api/`` is one claim of the directory ``src/api``, not of a
    node of its own; at any depth it counts once, and marks its node a directory."""
    issue = make_issue()
    for path in ("src/api/", "src/api/views.py", "src/", "lib/"):
        add_claim(issue, path, T0 + timedelta(hours=1))

    two = code_heatmap(workspace, mode="claims", **WINDOW)
    assert two.total == 4
    assert counts(two) == [("src", 3, 1), ("src/api", 2, 2), ("lib", 1, 1)]
    assert {node.path: node.is_dir for node in two.nodes} == {
        "src": True,
        "src/api": True,
        "lib": True,
    }
    deep = code_heatmap(workspace, mode="claims", depth=3, **WINDOW)
    assert ("src/api/views.py", 1, 3) in counts(deep)
    assert not any(node.path.endswith("/") for node in deep.nodes)
    prefix = selectors.normalise_prefix("./src//api/")
    inside = code_heatmap(workspace, mode="claims", prefix=prefix, **WINDOW)
    assert inside.prefix == "src/api" and inside.total == 2
    assert counts(inside) == [("src/api/views.py", 1, 1)]
    assert path_head("src/api/", 2) == "src/api" == path_head("src/api/", 5)
