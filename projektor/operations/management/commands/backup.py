"""``manage.py backup FILE``: a consistent copy of the SQLite database while agents write.

SQLite's online backup API copies the database page by page from one read
transaction: with WAL, writers go on meanwhile and the copy is the database as of
one moment, never a torn file (copying the file itself could be, and would miss
what is still in the -wal file). The copy is written beside FILE, checked with
``PRAGMA integrity_check``, and only then renamed to FILE.

PostgreSQL is backed up with its own tools, ``pg_dump`` (docs/operations.md, "Backups").
"""

import os
import sqlite3
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections


class Command(BaseCommand):
    help = "Copy the SQLite database to FILE, consistently, while it is in use."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="Where to write the copy (must not exist).")
        parser.add_argument("--database", default="default", help="The database alias.")

    def handle(self, *args: Any, **options: Any) -> None:
        target: Path = options["file"]
        connection = connections[options["database"]]
        if connection.vendor != "sqlite":
            raise CommandError(
                f"backup copies SQLite databases; this one is {connection.vendor}: "
                "use pg_dump (docs/operations.md, Backups)."
            )
        if target.exists():
            raise CommandError(f"{target} exists already: name a new file.")
        if not target.parent.is_dir():
            raise CommandError(f"{target.parent} is not a directory.")
        partial = target.with_name(f".{target.name}.partial")
        partial.unlink(missing_ok=True)
        connection.ensure_connection()
        source = connection.connection
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)  # all pages in one step: one consistent snapshot
            (verdict,) = copy.execute("PRAGMA integrity_check").fetchone()
        finally:
            copy.close()
        if verdict != "ok":
            partial.unlink(missing_ok=True)
            raise CommandError(f"the copy failed its integrity check: {verdict}")
        os.replace(partial, target)
        size = target.stat().st_size
        self.stdout.write(f"Backed up to {target} ({size} bytes, integrity ok).")
