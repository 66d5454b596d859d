"""The overlap rule (invariant 11 (overlap)) against a brute-force model, over generated trees.

The model knows nothing of strings: a path is a tuple of segments, a claim holds a
set of files of the tree, and two claims overlap iff some file is held by both. The
tree holds the generated files, each file a claim names, and one fresh file inside
each claimed directory (a directory claim holds the files made after it too, so
two nested directories overlap even while empty). Claims are drawn from the tree's
files and directories, their look-alikes (``src/api`` vs ``src/apiv2``, a file named
like a directory), in every spelling (``./``, ``//``, ``/.``, trailing slashes).
"""

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordination.errors import InvalidInput
from coordination.paths import (
    ancestors,
    as_directory,
    head,
    is_directory,
    lock_nodes,
    meeting_point,
    normalise_path,
    normalise_prefix,
    overlap_probes,
    overlapping_pairs,
    overlaps,
    subtree_bounds,
)
from coordination.paths import segments as path_segments

# Few letters, so that names share prefixes: "a" and "ab", "api" and "apiv2".
segment = st.sampled_from(["a", "ab", "b", "api", "apiv2", "api.py", "a0", "a-", "é", "a.b"])
file_path = st.lists(segment, min_size=1, max_size=4).map(tuple)
trees = st.lists(file_path, min_size=1, max_size=12)

FRESH = "\u2603new"  # a name no generated segment has


def spell(segments: tuple[str, ...], directory: bool, draw: st.DrawFn) -> str:
    """``segments`` spelled one of the many ways that normalise to them."""
    text = "./" * draw(st.integers(0, 2))
    for n, name in enumerate(segments):
        if n:
            text += draw(st.sampled_from(["/", "//", "/./"]))
        text += name
    if directory:
        text += draw(st.sampled_from(["/", "//", "/.", "/./", "/.//"]))
    return text


@st.composite
def claim_over(draw: st.DrawFn, tree: list[tuple[str, ...]]) -> tuple[tuple[str, ...], bool, str]:
    """(segments, is a directory, raw spelling) of a claim near the tree."""
    base = draw(st.sampled_from(tree))
    cut = draw(st.integers(1, len(base)))
    segments = base[:cut]
    if draw(st.booleans()):  # a look-alike: the last segment grown or swapped
        segments = segments[:-1] + (draw(st.sampled_from([segments[-1] + "v2", *["a", "api"]])),)
    directory = draw(st.booleans())
    return segments, directory, spell(segments, directory, draw)


@st.composite
def scenes(
    draw: st.DrawFn,
) -> tuple[list[tuple[str, ...]], list[tuple[tuple[str, ...], bool, str]]]:
    tree = draw(trees)
    claims = draw(st.lists(claim_over(tree), min_size=2, max_size=8))
    return tree, claims


def files_of_tree(tree, claims) -> set[tuple[str, ...]]:
    files = set(tree)
    for segments, directory, _ in claims:
        files.add(segments + (FRESH,) if directory else segments)
    return files


def held_by(claim: tuple[tuple[str, ...], bool, str], files) -> set[tuple[str, ...]]:
    """The model: a file claim holds the file of its name; a directory claim, every
    file strictly below it, segment by segment."""
    segments, directory, _ = claim
    if not directory:
        return {segments} & files
    return {f for f in files if len(f) > len(segments) and f[: len(segments)] == segments}


@settings(max_examples=400)
@given(scenes())
def test_overlap_by_the_rule_is_a_file_held_by_both(scene):
    tree, claims = scene
    files = files_of_tree(tree, claims)
    for first, second in combinations(claims, 2):
        a, b = normalise_path(first[2]), normalise_path(second[2])
        shared = held_by(first, files) & held_by(second, files)
        assert overlaps(a, b) == bool(shared), (a, b, shared)
        assert overlaps(a, b) == overlaps(b, a)
        if shared:
            deeper = meeting_point(a, b)
            assert deeper in (a, b) and overlaps(deeper, a) and overlaps(deeper, b)


@settings(max_examples=200)
@given(scenes())
def test_spelling_decides_nothing_but_the_path(scene):
    _, claims = scene
    for segments, directory, raw in claims:
        path = normalise_path(raw)
        assert is_directory(path) == directory
        assert path == "/".join(segments) + ("/" if directory else "")


@settings(max_examples=300)
@given(scenes())
def test_the_pairs_are_every_overlapping_pair_and_no_other(scene):
    _, claims = scene
    paths = [normalise_path(raw) for _, _, raw in claims]
    half = len(paths) // 2
    requested, held = paths[:half] or paths[:1], paths[half:]
    brute = sorted({(r, h) for r in requested for h in held if overlaps(r, h)})
    assert overlapping_pairs(requested, held) == brute


@settings(max_examples=300)
@given(scenes(), st.text(alphabet="ab/.0-é\u2603", max_size=12))
def test_a_subtree_is_exactly_its_byte_range(scene, tail):
    """What the database's range scan relies on: ``low < s < high`` in code point
    order (UTF-8 byte order, SQLite's BINARY, PostgreSQL's "C") ⇔ ``s`` lies under."""
    tree, claims = scene
    candidates = {"/".join(f) for f in tree} | {normalise_path(raw) for _, _, raw in claims}
    directories = [normalise_path(raw) for _, d, raw in claims if d]
    for directory in directories:
        low, high = subtree_bounds(directory)
        for path in candidates | {directory + tail, directory[:-1] + tail}:
            inside = low < path < high
            assert inside == (path.startswith(directory) and path != directory), (directory, path)
            assert inside == (low.encode() < path.encode() < high.encode())


@settings(max_examples=300)
@given(scenes())
def test_the_probes_find_exactly_the_overlapping_claims(scene):
    """What the claim statements look up (equality on ``exact``, a range per requested
    directory) finds a held claim iff it overlaps a requested path."""
    _, claims = scene
    paths = [normalise_path(raw) for _, _, raw in claims]
    half = len(paths) // 2
    requested, held = paths[:half] or paths[:1], paths[half:]
    exact, bounds = overlap_probes(requested)
    for path in held:
        found = path in exact or any(low < path < high for low, high in bounds)
        assert found == any(overlaps(r, path) for r in requested), (requested, path)


@settings(max_examples=200)
@given(scenes())
def test_a_prefix_holds_what_lies_under_its_directory(scene):
    """``under_prefix``'s test (the prefix, or anything that starts with its
    directory) selects a path iff its segments begin with the prefix's."""
    tree, claims = scene
    candidates = {"/".join(f) for f in tree} | {normalise_path(raw) for _, _, raw in claims}
    for _, _, raw in claims:
        prefix = normalise_prefix(raw)
        directory, names = as_directory(prefix), path_segments(prefix)
        for path in candidates:
            selected = path == prefix or path.startswith(directory)
            assert selected == (path_segments(path)[: len(names)] == names), (prefix, path)


def test_a_head_is_the_first_segments_without_a_trailing_slash():
    assert head("a/b/c.py", 2) == "a/b" and head("a/b/", 3) == "a/b" == head("a/b/", 2)
    assert head("a.py", 4) == "a.py" and as_directory("src") == "src/" == as_directory("src/")


@settings(max_examples=300)
@given(scenes())
def test_two_claims_lock_against_each_other_iff_they_overlap(scene):
    """Multi-granularity locking: each path exclusive, every directory above it shared.
    Two claims' locks conflict (a node one takes exclusively and the other at all)
    exactly when the claims overlap: overlapping claimers serialise, disjoint ones
    never wait for each other."""
    _, claims = scene
    for first, second in combinations(claims, 2):
        a, b = normalise_path(first[2]), normalise_path(second[2])
        mine, theirs = lock_nodes([a]), lock_nodes([b])
        conflict = any(
            node in theirs and (exclusive or theirs[node]) for node, exclusive in mine.items()
        )
        assert conflict == overlaps(a, b), (a, b, mine, theirs)


def test_the_examples_of_the_contract():
    # The overlap rule's own examples are one table, tests/overlap_cases.json, that the
    # server's rule and the agent command's are both held to (tests/agent/test_overlap_cases.py).
    assert normalise_path("./src//api/") == "src/api/"
    assert ancestors("a/b/c.py") == ["a/", "a/b/"] == ancestors("a/b/c/")
    assert ancestors("a.py") == [] == ancestors("a/")
    assert meeting_point("src/", "src/api/x.py") == "src/api/x.py"
    assert lock_nodes(["src/", "src/api/x.py"]) == {
        "src/": True,
        "src/api/": False,
        "src/api/x.py": True,
    }


@pytest.mark.parametrize("raw", ["/", "./", ".", "//", "././/"])
def test_a_directory_claim_needs_a_segment(raw):
    with pytest.raises(InvalidInput):
        normalise_path(raw)
