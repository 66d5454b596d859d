"""The ``projektor_agent`` package as the files the server hands out."""

import io
import zipfile
from pathlib import Path

import projektor_agent

PACKAGE = Path(projektor_agent.__file__).parent
SHEBANG = b"#!/usr/bin/env python3\n"
# The archive's entry point: what ``python3 projektor`` (or ``./projektor``) runs.
MAIN = b"import sys\n\nfrom projektor_agent.cli import main\n\nsys.exit(main())\n"
# A fixed time for every entry, so the same package makes the same bytes.
ZIP_TIME = (2020, 1, 1, 0, 0, 0)


def zipapp() -> bytes:
    """The package as a zipapp: a shebang line, then a zip archive with a top-level
    ``__main__.py`` (Python runs a zip file that starts with anything). Installed as a
    git hook named ``pre-commit``, it is ``projektor guard pre-commit``."""
    buffer = io.BytesIO()
    buffer.write(SHEBANG)  # as zipapp.create_archive does: the archive follows it
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(entry("__main__.py"), MAIN)
        for source in sorted(PACKAGE.glob("*.py")):
            name = f"{PACKAGE.name}/{source.name}"
            archive.writestr(entry(name), source.read_bytes())
    return buffer.getvalue()


def entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info
