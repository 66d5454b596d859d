"""The path normaliser (invariant 6 (paths are literal)): examples, every rejected kind, and
properties."""

import sys
import unicodedata

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from coordination.errors import InvalidInput
from coordination.paths import (
    CONTROL_CHARACTER,
    MAX_PATH_BYTES,
    normalise_path,
    normalise_paths,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("src/a.py", "src/a.py"),
        ("./src/a.py", "src/a.py"),
        ("src//a.py", "src/a.py"),
        ("./src//./a.py", "src/a.py"),
        ("././src/./././a.py", "src/a.py"),
        ("src/", "src/"),
        ("src///", "src/"),
        ("src/.", "src/"),
        ("./src/./", "src/"),
        ("a//b/./", "a/b/"),
        ("a", "a"),
        ("...", "..."),
        ("..a/b..", "..a/b.."),
        (" spaced name .txt", " spaced name .txt"),
        ("Src/A.PY", "Src/A.PY"),
        ("dossier/résumé.md", "dossier/résumé.md"),
    ],
)
def test_spellings_normalise_to_one_path(raw, expected):
    assert normalise_path(raw) == expected


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("/etc/passwd", "absolute"),
        ("//server/share", "absolute"),
        ("..", "'..'"),
        ("../secrets", "'..'"),
        ("src/../../x", "'..'"),
        ("src/..", "'..'"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("tab\there", "control character"),
        ("del\x7f", "control character"),
        ("c1\x85", "control character"),
        ("src\\a.py", "backslash"),
        ("", "names no file"),
        (".", "names no file"),
        ("./", "names no file"),
        ("/", "absolute"),
        ("././/.", "names no file"),
        ("a" * (MAX_PATH_BYTES + 1), "longer than"),
        ("é" * (MAX_PATH_BYTES // 2 + 1), "longer than"),
        ("lone\ud800surrogate", "Unicode"),
    ],
)
def test_every_invalid_kind_is_rejected_naming_the_path(raw, why):
    with pytest.raises(InvalidInput) as caught:
        normalise_path(raw)
    error = caught.value
    assert error.status == 400 and error.code == "invalid"
    assert why in error.detail
    assert error.extra["path"] == raw.encode("utf-8", "backslashreplace").decode()


def test_the_byte_limit_counts_utf8_bytes_of_the_normalised_path():
    assert normalise_path("a" * MAX_PATH_BYTES) == "a" * MAX_PATH_BYTES
    assert normalise_path("./" + "a" * MAX_PATH_BYTES) == "a" * MAX_PATH_BYTES
    two_byte = "é" * (MAX_PATH_BYTES // 2)
    assert normalise_path(two_byte) == two_byte


def test_a_trailing_slash_makes_a_directory_a_claim_of_its_own():
    assert normalise_path("src/") == normalise_path("src//") == normalise_path("src/.") == "src/"
    assert normalise_path("src") == "src"
    assert normalise_path("src") != normalise_path("src/")
    assert normalise_path("src/a.py") != normalise_path("src/")


def test_the_byte_limit_counts_a_directorys_slash():
    assert normalise_path("a" * (MAX_PATH_BYTES - 1) + "/") == "a" * (MAX_PATH_BYTES - 1) + "/"
    with pytest.raises(InvalidInput, match="longer than"):
        normalise_path("a" * MAX_PATH_BYTES + "/")


@pytest.mark.parametrize(
    ("raw", "instead"),
    [
        ("src/*.py", "claim the directory instead: 'src/'"),
        ("src/api/**", "claim the directory instead: 'src/api/'"),
        ("./src//a?.py", "claim the directory instead: 'src/'"),
        ("src/[ab]/x.py", "claim the directory instead: 'src/'"),
        ("*.md", "claim the directory that holds the files"),
        ("**/*.md", "claim the directory that holds the files"),
    ],
)
def test_a_glob_is_refused_naming_the_directory_to_claim(raw, instead):
    with pytest.raises(InvalidInput) as caught:
        normalise_path(raw)
    assert caught.value.code == "invalid" and caught.value.extra["path"] == raw
    assert "globs are not claims" in caught.value.detail
    assert instead in caught.value.detail


def test_a_literal_name_keeps_glob_characters():
    """A staged file may be called ``a[1].py``: checking it is no glob."""
    assert normalise_path("./src/a[1]*?.py", literal=True) == "src/a[1]*?.py"


def test_duplicates_in_any_spelling_count_once_and_come_back_sorted():
    assert normalise_paths(["b.py", "./a.py", "a.py", "b.py/", "a//a.py", "./b.py//"]) == [
        "a.py",
        "a/a.py",
        "b.py",
        "b.py/",
    ]


# --- properties ---------------------------------------------------------------------

# Mostly the characters that matter to the rules, plus anything at all.
path_chars = st.one_of(
    st.sampled_from(["/", "/", ".", ".", "a", "b", "\\", "\x00", "\n", " ", "é"]),
    st.characters(),
)
any_path = st.text(alphabet=path_chars, max_size=40)
segment = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\\"),
    min_size=1,
    max_size=8,
).filter(lambda s: s not in (".", ".."))


@given(any_path, st.booleans())
def test_normalising_is_idempotent(raw, literal):
    try:
        path = normalise_path(raw, literal=literal)
    except InvalidInput:
        return
    assert normalise_path(path, literal=literal) == path


@given(any_path)
def test_a_normalised_path_is_never_absolute_nor_climbs(raw):
    try:
        path = normalise_path(raw)
    except InvalidInput:
        return
    segments = path.removesuffix("/").split("/")
    assert not path.startswith("/")
    assert ".." not in segments
    assert "" not in segments and "." not in segments
    assert not any(char in path for char in "*?[")
    assert "\\" not in path
    assert 0 < len(path.encode("utf-8")) <= MAX_PATH_BYTES


@given(
    segments=st.lists(segment, min_size=1, max_size=6),
    leading_dots=st.integers(min_value=0, max_value=3),
    separators=st.lists(st.sampled_from(["/", "//", "/./", "/././/"]), min_size=5, max_size=5),
    trailing=st.sampled_from(["", "/", "/.", "//", "/./"]),
)
def test_two_spellings_of_one_path_normalise_alike(segments, leading_dots, separators, trailing):
    canonical = "/".join(segments) + ("/" if trailing else "")
    assume(len(canonical.encode("utf-8")) <= MAX_PATH_BYTES)
    spelled = "./" * leading_dots + segments[0]
    for separator, name in zip(separators, segments[1:], strict=False):
        spelled += separator + name
    spelled += trailing
    assert normalise_path(spelled, literal=True) == canonical
    assert normalise_path(canonical, literal=True) == canonical


def test_the_control_characters_refused_are_unicodes_every_cc_and_no_other():
    """The scan for control characters is Unicode's general category Cc, code point
    for code point (surrogates included: they are Cs)."""
    every = (chr(point) for point in range(sys.maxunicode + 1))
    scanned = {char for char in every if CONTROL_CHARACTER.search(char)}
    assert scanned == {
        chr(point)
        for point in range(sys.maxunicode + 1)
        if unicodedata.category(chr(point)) == "Cc"
    }
