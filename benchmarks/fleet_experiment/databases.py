"""The experiment's databases: one migrated template, a fresh copy per condition."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.conf import settings as django_settings

from benchmarks import server as harness

ROOT = Path(django_settings.BASE_DIR)


class Databases:
    """One migrated template beside the configured database, and a fresh copy of it per
    condition: a file copy on SQLite, ``CREATE DATABASE … TEMPLATE`` on PostgreSQL."""

    def __init__(self, settings_dict: dict[str, Any], where: Path) -> None:
        self.sqlite = "sqlite" in settings_dict["ENGINE"]
        self.where = where
        self.made: list[str] = []
        base = str(settings_dict["NAME"]).rsplit("/", 1)[-1] or "projektor"
        self.prefix = f"{base}_fleet_{os.getpid()}"
        self.admin: dict[str, Any] = {
            "host": settings_dict.get("HOST") or harness.HOST,
            "port": int(settings_dict.get("PORT") or 5432),
            "user": settings_dict.get("USER") or "postgres",
            "password": settings_dict.get("PASSWORD") or None,
            "dbname": "postgres",
            "autocommit": True,
        }

    def url(self, name: str) -> str:
        if self.sqlite:
            return f"sqlite:///{self.where / (name + '.sqlite3')}"
        auth = quote(self.admin["user"])
        if self.admin["password"]:
            auth += ":" + quote(self.admin["password"])
        return f"postgres://{auth}@{self.admin['host']}:{self.admin['port']}/{self.prefix}_{name}"

    def execute(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(**self.admin) as connection:
            connection.execute(statement)

    def template(self) -> None:
        if not self.sqlite:
            self.execute(f'DROP DATABASE IF EXISTS "{self.prefix}_template" WITH (FORCE)')
            self.execute(f'CREATE DATABASE "{self.prefix}_template"')
            self.made.append("template")
        migrate = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
            cwd=ROOT,
            env=harness.app_environment({"DATABASE_URL": self.url("template")}),
            capture_output=True,
            text=True,
            check=False,
        )
        if migrate.returncode != 0:
            raise RuntimeError(f"migrate failed: {migrate.stderr[-2000:]}")

    def fresh(self, name: str) -> str:
        if self.sqlite:
            shutil.copyfile(self.where / "template.sqlite3", self.where / f"{name}.sqlite3")
        else:
            self.execute(f'DROP DATABASE IF EXISTS "{self.prefix}_{name}" WITH (FORCE)')
            self.execute(
                f'CREATE DATABASE "{self.prefix}_{name}" TEMPLATE "{self.prefix}_template"'
            )
            self.made.append(name)
        return self.url(name)

    def drop(self) -> None:
        if not self.sqlite:
            for name in self.made:
                with suppress(Exception):  # noqa: BLE001 - the next run drops it again
                    self.execute(f'DROP DATABASE IF EXISTS "{self.prefix}_{name}" WITH (FORCE)')
