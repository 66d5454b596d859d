"""Small filters for the story pages."""

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince

from heatmap.landings import detail_tail
from heatmap.resources import slot_words

register = template.Library()

CARD_PATHS = 3  # paths a board card lists; the rest are counted, so cards stay short


@register.filter
def held_for(start: datetime, end: datetime | None) -> str:
    """How long a claim was held (until now while unreleased): seconds when short,
    which ``timesince`` would round to "0 minutes"."""
    seconds = int(((end or timezone.now()) - start).total_seconds())
    if seconds < 60:
        return f"{max(seconds, 0)} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


@register.filter
def ago(moment: datetime | None) -> str:
    """``3 minutes ago``; under a minute "just now", where ``timesince`` says "0 minutes"."""
    if moment is None:
        return "never"
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment)} ago"


@register.filter
def path_breaks(path: str) -> SafeString:
    """The path with a line-break opportunity after each ``/``, so that a narrow card
    wraps it between segments, never inside a name."""
    return mark_safe("/<wbr>".join(escape(segment) for segment in str(path).split("/")))


@register.filter
def name_breaks(name: str) -> SafeString:
    """A resource's name with a line-break opportunity after each ``:``, ``-``, ``.``
    and ``_``, so a long one wraps between its words in a narrow column."""
    return mark_safe(re.sub(r"([:._-])", r"\1<wbr>", escape(str(name))))


@register.filter
def slots(numbers: list[int]) -> str:
    """A hold's slot numbers, runs as ranges: ``slots 0–3``."""
    return slot_words(numbers)


@dataclass(frozen=True)
class Capped:
    shown: list[Any]
    more: int


@register.filter
def capped(rows: list[Any]) -> Capped:
    """The first ``CARD_PATHS`` rows, and how many more there are."""
    rows = list(rows)
    return Capped(rows[:CARD_PATHS], max(len(rows) - CARD_PATHS, 0))


@register.filter
def ordinal(number: int | None) -> str:
    """``1st``, ``2nd``, ``3rd``, ``11th``, ``22nd``: a place in a queue."""
    if number is None:
        return ""
    n = int(number)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@register.filter
def tail_lines(detail: str) -> str:
    """A rejection's detail's last lines (the check's output ends with why)."""
    return detail_tail(detail or "")


@register.filter
def short_commit(commit: str) -> str:
    """A commit's first 12 characters, as git shows it short."""
    return (commit or "")[:12]
