"""The route label of a request: its URL pattern, the same for every id it names.

``api/v1/sessions/<pk>/heartbeat/`` rather than ``/api/v1/sessions/7/heartbeat/``:
a label per pattern keeps the metrics' series few, whatever the ids. DRF's router
writes regular expressions (``^sessions/(?P<pk>[0-9]{1,19})/heartbeat/$``); their
named groups become ``<name>`` and the anchors go.
"""

from functools import lru_cache

from django.http import HttpRequest

UNMATCHED = "unmatched"  # no pattern matched (a 404 outside /api/, a refused host)


def route_of(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    if match is None or not match.route:
        return UNMATCHED
    return tidy(match.route)


@lru_cache(maxsize=1024)
def tidy(route: str) -> str:
    out: list[str] = []
    at = 0
    while at < len(route):
        if route.startswith("(?P<", at):
            end = route.index(">", at)
            out.append(f"<{route[at + 4 : end]}>")
            at = skip_group(route, at)
        elif route[at] in "^$":
            at += 1
        elif route.startswith("\\.", at):  # DRF's format suffix, "\.(?P<format>...)"
            out.append(".")
            at += 2
        else:
            out.append(route[at])
            at += 1
    return "".join(out)


def skip_group(route: str, start: int) -> int:
    """The index just past the group opened at ``start`` (nested groups, escapes and
    character classes included)."""
    depth, at, in_class = 0, start, False
    while at < len(route):
        char = route[at]
        if char == "\\":
            at += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return at + 1
        at += 1
    return at
