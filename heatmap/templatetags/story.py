"""Small filters for the story pages."""

from datetime import datetime

from django import template
from django.utils import timezone

register = template.Library()


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
