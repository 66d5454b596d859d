"""A deployment refuses to start when its static files are not collected.

With DEBUG off, WhiteNoise serves only what ``collectstatic`` put in STATIC_ROOT;
a file missing there is a 404 for every page that loads it (without plotly.js every
heatmap loses its plot, silently). ``manage.py check --deploy`` reports it, and
gunicorn (``gunicorn.conf.py``) runs this check before it starts its workers.
"""

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles.finders import get_finders
from django.core.checks import CheckMessage, Error, register

TAG = "projektor"
STATIC_NOT_COLLECTED = "projektor.E001"


def uncollected_static_files() -> list[str]:
    """Static files the finders know that STATIC_ROOT lacks (all of them, when it
    does not exist): collected once, they only go missing after an upgrade adds some."""
    root = Path(settings.STATIC_ROOT or "")
    missing = []
    seen = set()
    for finder in get_finders():
        for found, storage in finder.list(["CVS", ".*", "*~"]):
            prefix = getattr(storage, "prefix", None)  # as collectstatic places it
            path = f"{prefix}/{found}" if prefix else found
            if path not in seen:
                seen.add(path)
                if not (root / path).is_file():
                    missing.append(path)
    return sorted(missing)


@register(TAG, deploy=True)
def static_files_collected(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if settings.DEBUG:
        return []  # runserver serves them from the apps
    missing = uncollected_static_files()
    if not missing:
        return []
    return [
        Error(
            f"{len(missing)} static files are not collected in {settings.STATIC_ROOT} "
            f"(for example {missing[0]}): with DEBUG off the pages would miss them.",
            hint="Run `python manage.py collectstatic --noinput` (`make serve` does).",
            id=STATIC_NOT_COLLECTED,
        )
    ]
