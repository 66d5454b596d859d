"""The one path normaliser of file claims (invariant 6).

A claim names one literal path of the repository, relative to its root. Two
spellings of the same path must name the same claim, so every path that enters
Projektor (claims, releases, filters) goes through ``normalise_path`` first; after
that, matching is exact string equality. There is no globbing and no subtree
reservation: claiming ``src`` does not reserve ``src/a.py``.

Rules:

- ``.`` segments and empty segments (``./a``, ``a//b``, ``a/./b``) are dropped;
- a trailing ``/`` is dropped with them, so ``src/`` and ``src`` are one claim
  (a claim names an entry of the tree, file or directory, never "everything under");
- rejected, naming the path: absolute paths, ``..`` segments (they could leave the
  repository, and ``a/../b`` would be a second spelling of ``b``), control
  characters, backslashes (a second separator on some platforms), strings that are
  not valid Unicode text, an empty result, and results over 1024 bytes of UTF-8.

Case and Unicode normal form are kept as given: git compares paths byte for byte.
The function is idempotent: a normalised path normalises to itself.
"""

import unicodedata
from collections.abc import Iterable, Sequence

from coordination.errors import InvalidInput

MAX_PATH_BYTES = 1024
MAX_PATHS = 100  # per claim or release
# Per check: a pre-commit guard sends every staged path at once.
MAX_CHECK_PATHS = 1000


def printable(raw: str) -> str:
    """``raw`` made safe to echo in a JSON error (lone surrogates escaped)."""
    return raw.encode("utf-8", "backslashreplace").decode("utf-8")


def _invalid(raw: str, why: str) -> InvalidInput:
    shown = printable(raw)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return InvalidInput(f"Path {shown!r} is invalid: {why}.", path=printable(raw))


def normalise_path(raw: str) -> str:
    """The canonical spelling of ``raw``, or ``InvalidInput`` naming it."""
    if not isinstance(raw, str):
        raise InvalidInput("A path must be a string.", path=repr(raw))
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(raw, "it is not valid Unicode text") from None
    if any(unicodedata.category(char) == "Cc" for char in raw):
        raise _invalid(raw, "it contains a control character")
    if "\\" in raw:
        raise _invalid(raw, "it contains a backslash; separate segments with '/'")
    if raw.startswith("/"):
        raise _invalid(raw, "it is absolute; give it relative to the repository root")
    segments = [segment for segment in raw.split("/") if segment not in ("", ".")]
    if ".." in segments:
        raise _invalid(raw, "it contains a '..' segment")
    path = "/".join(segments)
    if not path:
        raise _invalid(raw, "it names no file")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise _invalid(raw, f"it is longer than {MAX_PATH_BYTES} bytes")
    return path


def normalise_paths(raws: Iterable[str]) -> list[str]:
    """Normalise every path; duplicates (in any spelling) count once. Sorted, so
    callers that lock per path always lock in the same order."""
    return sorted({normalise_path(raw) for raw in raws})


def checked_paths(paths: Sequence[str], *, limit: int) -> list[str]:
    """1 to ``limit`` paths, each normalised; sorted and without duplicates."""
    if isinstance(paths, str):  # a str is a Sequence[str] too: one path, not its letters
        raise InvalidInput("Give the paths as a list of strings.", field="paths")
    if not 1 <= len(paths) <= limit:
        raise InvalidInput(
            f"Give 1 to {limit} paths, not {len(paths)}.", field="paths", count=len(paths)
        )
    return normalise_paths(paths)
