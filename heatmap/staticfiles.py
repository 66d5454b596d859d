"""Serve plotly.js from the installed ``plotly`` package as ``plotly/plotly.min.js``.

The pages must work offline (no CDN), and the plotly package already ships the
matching plotly.js; this finder exposes that one file to ``staticfiles`` (and so to
``collectstatic`` and WhiteNoise) without copying it into the repository.
"""

from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_DIR = Path(plotly.__file__).parent / "package_data"
PLOTLY_FILE = "plotly.min.js"
STATIC_PATH = f"plotly/{PLOTLY_FILE}"


class PlotlyJsFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=PLOTLY_DIR)
        self.storage.prefix = "plotly"  # type: ignore[attr-defined]  # read by collectstatic

    # Untyped like Django's own finders, which also answer [] for "not here".
    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:  # type: ignore[override]
        if path != STATIC_PATH:
            return []
        found = str(PLOTLY_DIR / PLOTLY_FILE)
        return [found] if find_all or kwargs.get("all") else found

    def list(self, ignore_patterns: Any) -> Any:
        yield PLOTLY_FILE, self.storage
