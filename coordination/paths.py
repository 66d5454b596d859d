"""The one path normaliser of file claims, and the overlap rule (invariants 6 (paths are literal)
and 11 (overlap)).

A claim names one path of the repository, relative to its root: a file (``src/a.py``)
or, ending in ``/``, a directory and everything under it (``src/api/``, a *directory
claim*). Two spellings of the same path must name the same claim, so every path that
enters Projektor (claims, releases, checks, filters) goes through ``normalise_path``
first; after that, two claims are the same claim iff their strings are equal.

Rules:

- ``.`` segments and empty segments (``./a``, ``a//b``, ``a/./b``) are dropped;
- a path whose last segment is empty or ``.`` (``src/``, ``src//``, ``src/.``) is a
  directory and keeps exactly one trailing ``/``; ``src`` (a file) and ``src/`` (a
  directory) are two different claims;
- ``*``, ``?`` and ``[`` are refused in a claim (``literal=False``): globs are not
  claims, and the detail says which directory to claim instead. A name of the tree
  (a staged file that ``/file-claims/check/`` is asked about, a filter's value) is
  ``literal``: there they are characters like any other;
- rejected, naming the path: absolute paths, ``..`` segments (they could leave the
  repository, and ``a/../b`` would be a second spelling of ``b``), control
  characters, backslashes (a second separator on some platforms), strings that are
  not valid Unicode text, an empty result (``/``, ``./`` and ``.`` name nothing), and
  results over 1024 bytes of UTF-8 (the trailing ``/`` included).

Case and Unicode normal form are kept as given: git compares paths byte for byte.
The function is idempotent: a normalised path normalises to itself.

**Overlap** (invariant 11 (overlap)): two normalised claims overlap when they are equal, or one
is a directory and the other starts with it. A directory ends in ``/``, so the test
is by whole segments: ``src/api/`` holds ``src/api/v2/x.py``, never ``src/apiv2.py``
nor ``src/api`` (a file of that name). The database finds the same sets with index
range scans: a directory ``d/`` holds exactly the strings ``s`` with
``'d/' < s < 'd0'`` in byte order (``'0'`` is the byte after ``'/'``; see
``subtree_bounds``), and the directories that hold a path are its ``ancestors``.

Every reader of the rule takes its pieces from here: the claim statements
(``overlap_probes``, ``lock_nodes``), the list filters and the heatmap
(``under_prefix``, ``head``).
"""

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coordination.errors import InvalidInput

if TYPE_CHECKING:
    from django.db.models import QuerySet

MAX_PATH_BYTES = 1024
MAX_PATHS = 100  # per claim or release
# Per check: a pre-commit guard sends every staged path at once.
MAX_CHECK_PATHS = 1000
GLOB_CHARACTERS = "*?["
# Unicode's control characters (general category Cc, fixed by its stability policy):
# C0, DEL and C1. One scan in C, not a category lookup per character.
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(raw: str) -> str:
    """``raw`` made safe to echo in a JSON error (lone surrogates escaped)."""
    return raw.encode("utf-8", "backslashreplace").decode("utf-8")


def _invalid(raw: str, why: str) -> InvalidInput:
    shown = printable(raw)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return InvalidInput(f"Path {shown!r} is invalid: {why}.", path=printable(raw))


def _glob_refusal(raw: str, segments: list[str]) -> InvalidInput:
    """A glob: say which directory holds what it would match, and to claim it."""
    first = next(n for n, segment in enumerate(segments) if set(segment) & set(GLOB_CHARACTERS))
    char = next(char for char in segments[first] if char in GLOB_CHARACTERS)
    if first:
        instead = "claim the directory instead: " + repr("/".join(segments[:first]) + "/")
    else:
        instead = "claim the directory that holds the files (a path ending in '/') or each file"
    return _invalid(raw, f"{char!r} makes it a glob, and globs are not claims; {instead}")


def normalise_path(raw: str, *, literal: bool = False) -> str:
    """The canonical spelling of ``raw`` (a directory keeps one trailing ``/``), or
    ``InvalidInput`` naming it. ``literal``: a name of the tree, where ``*``, ``?``
    and ``[`` are plain characters; otherwise they are refused as globs."""
    if not isinstance(raw, str):
        raise InvalidInput("A path must be a string.", path=repr(raw))
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(raw, "it is not valid Unicode text") from None
    if CONTROL_CHARACTER.search(raw):
        raise _invalid(raw, "it contains a control character")
    if "\\" in raw:
        raise _invalid(raw, "it contains a backslash; separate segments with '/'")
    if raw.startswith("/"):
        raise _invalid(raw, "it is absolute; give it relative to the repository root")
    spelled = raw.split("/")
    segments = [segment for segment in spelled if segment not in ("", ".")]
    if ".." in segments:
        raise _invalid(raw, "it contains a '..' segment")
    if not segments:
        raise _invalid(raw, "it names no file")
    if not literal and any(char in raw for char in GLOB_CHARACTERS):
        raise _glob_refusal(raw, segments)
    path = "/".join(segments) + ("/" if spelled[-1] in ("", ".") else "")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise _invalid(raw, f"it is longer than {MAX_PATH_BYTES} bytes")
    return path


def normalise_paths(raws: Iterable[str], *, literal: bool = False) -> list[str]:
    """Normalise every path; duplicates (in any spelling) count once. Sorted, so
    callers that lock per path always lock in the same order."""
    return sorted({normalise_path(raw, literal=literal) for raw in raws})


def checked_paths(paths: Sequence[str], *, limit: int, literal: bool = False) -> list[str]:
    """1 to ``limit`` paths, each normalised; sorted and without duplicates."""
    if isinstance(paths, str):  # a str is a Sequence[str] too: one path, not its letters
        raise InvalidInput("Give the paths as a list of strings.", field="paths")
    if not 1 <= len(paths) <= limit:
        raise InvalidInput(
            f"Give 1 to {limit} paths, not {len(paths)}.", field="paths", count=len(paths)
        )
    return normalise_paths(paths, literal=literal)


@dataclass(frozen=True)
class NormalisedPaths:
    """The paths of one claim, checked and normalised once (``checked_paths``): 1 to
    ``MAX_PATHS``, sorted, without duplicates. Made at a call's entrance (``of``) and
    passed down: a step given one takes its paths as they are, without checking them
    again."""

    paths: tuple[str, ...]

    @classmethod
    def of(cls, raw: Sequence[str]) -> "NormalisedPaths":
        return cls(tuple(checked_paths(raw, limit=MAX_PATHS)))

    def __len__(self) -> int:
        return len(self.paths)

    def as_list(self) -> list[str]:
        return list(self.paths)


def normalise_prefix(raw: str) -> str:
    """A prefix filter's value (``?path_prefix=``, the heatmap's ``prefix``): spelled
    like the paths it selects, with or without its trailing ``/``; literal."""
    return normalise_path(raw, literal=True).rstrip(SEPARATOR)


# --- the overlap rule (invariant 11 (overlap)) ----------------------------------------------------


SEPARATOR = "/"


def is_directory(path: str) -> bool:
    """A normalised path names a directory claim iff it ends in ``/``."""
    return path.endswith(SEPARATOR)


def as_directory(prefix: str) -> str:
    """The directory a prefix names (``src`` → ``src/``): what every path under it
    starts with, segment for segment."""
    return prefix.rstrip(SEPARATOR) + SEPARATOR


def segments(path: str) -> list[str]:
    """The segments of a normalised path; a directory's trailing ``/`` is not one."""
    return path.rstrip(SEPARATOR).split(SEPARATOR)


def head(path: str, count: int) -> str:
    """The first ``count`` segments: ``head("a/b/c", 2) == "a/b"``, and a directory
    keeps no trailing ``/`` (``head("a/b/", 3) == "a/b"``)."""
    return SEPARATOR.join(path.split(SEPARATOR)[:count]).rstrip(SEPARATOR)


def ancestors(path: str) -> list[str]:
    """The directories strictly above a normalised path, outermost first:
    ``a/b/c.py`` and ``a/b/c/`` both have ``["a/", "a/b/"]``."""
    names = segments(path)
    return [as_directory(SEPARATOR.join(names[:end])) for end in range(1, len(names))]


def subtree_bounds(directory: str) -> tuple[str, str]:
    """``(low, high)``: the paths strictly under ``directory`` are exactly the strings
    ``s`` with ``low < s < high`` in byte (code point) order, ``high`` being the
    directory with its ``/`` turned into ``0``, the next character. An index on
    ``path`` in that order answers it with one range scan."""
    assert is_directory(directory), directory
    return directory, directory[:-1] + "0"


def lies_under(path: str, directory: str) -> bool:
    """``path`` is ``directory`` or lies below it, by whole segments (``directory``
    ends in ``/``: ``src/api/`` holds ``src/api/v2/x.py``, not ``src/apiv2.py``)."""
    return path.startswith(directory)


def overlaps(first: str, second: str) -> bool:
    """Two normalised claims overlap: equal, or one a directory the other lies under."""
    if first == second:
        return True
    if is_directory(first) and lies_under(second, first):
        return True
    return is_directory(second) and lies_under(first, second)


def overlap_probes(paths: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """How an index finds the claims that overlap ``paths``: ``exact``, the paths and
    every directory above one (equality), and the ``subtree_bounds`` of each
    requested directory (one range scan each)."""
    wanted = sorted(set(paths))
    exact = sorted({*wanted, *(above for path in wanted for above in ancestors(path))})
    return exact, [subtree_bounds(path) for path in wanted if is_directory(path)]


def meeting_point(first: str, second: str) -> str:
    """Where two overlapping claims meet: the deeper of them (the file under the
    directory), the path a conflict is logged at."""
    assert overlaps(first, second), (first, second)
    return first if len(first) >= len(second) else second


def lock_nodes(paths: Iterable[str]) -> dict[str, bool]:
    """The nodes a claim of ``paths`` locks, each with ``True`` for exclusive: every
    requested path exclusively, every directory above one of them in intention
    (shared) mode; a node needed both ways is taken exclusively only."""
    nodes: dict[str, bool] = {}
    for path in paths:
        for directory in ancestors(path):
            nodes.setdefault(directory, False)
        nodes[path] = True
    return nodes


def overlapping_pairs(requested: Iterable[str], held: Iterable[str]) -> list[tuple[str, str]]:
    """Every ``(requested path, held path)`` pair that overlaps, sorted; in time that
    follows the pairs found, not ``len(requested) × len(held)``: a held path meets
    the requested path equal to it, the requested directories above it, and (if it
    is a directory) the requested paths under it, found by bisection."""
    wanted = sorted(set(requested))
    wanted_set = set(wanted)
    pairs: set[tuple[str, str]] = set()
    for path in set(held):
        if path in wanted_set:
            pairs.add((path, path))
        pairs.update((above, path) for above in ancestors(path) if above in wanted_set)
        if is_directory(path):
            low, high = subtree_bounds(path)
            start = bisect.bisect_right(wanted, low)
            for below in wanted[start : bisect.bisect_left(wanted, high, lo=start)]:
                pairs.add((below, path))
    return sorted(pairs)


# --- the rule in a query ------------------------------------------------------------------


def under_prefix(queryset: "QuerySet[Any]", field: str, raw: str) -> "QuerySet[Any]":
    """The rows whose ``field`` is the normalised prefix or lies below it, by whole
    segments (``src`` holds ``src/a.py``, not ``srcs/b.py``); ``src`` and ``src/``
    select alike, the directory claim ``src/`` included. Compared with ``Left``
    rather than LIKE, which SQLite folds to case-insensitive."""
    # Imported here: the statement builders import this module and run without Django.
    from django.db.models import Q
    from django.db.models.functions import Left

    prefix = normalise_prefix(raw)
    directory = as_directory(prefix)
    starts = Left(field, len(directory))
    return queryset.alias(path_head=starts).filter(Q(**{field: prefix}) | Q(path_head=directory))
