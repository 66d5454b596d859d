"""What the live fleet's tests share: the demo seeded small in the test database, a
place of its own for the demo repository, gunicorn on the test database, and
``manage.py demo_fleet`` run as ``make run`` runs it, as a process of its own."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from benchmarks import server as harness
from coordination.models import Workspace
from demo import world

PATIENCE = 120.0  # seconds a condition may take on a loaded machine before the test fails
ROOT = Path(__file__).resolve().parents[2]


def wait_until(condition: Callable[[], object], what: str, patience: float = PATIENCE) -> None:
    deadline = time.monotonic() + patience
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {patience:g} s for {what}")
        time.sleep(0.2)


@pytest.fixture
def small_demo() -> Workspace:
    call_command("seed_demo", "--agents", "4", "--days", "1", stdout=StringIO())
    return Workspace.objects.get(slug=world.SLUG)


@pytest.fixture
def demo_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROJEKTOR_DEMO_DIR", str(tmp_path / "demo"))
    return tmp_path / "demo"


def processes_under(folder: Path) -> list[str]:
    """The live processes whose command line names ``folder`` (the runners and their
    agents name the demo's folders)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(folder) in text and state not in ("Z", "X"):
            found.append(f"{cmdline.parent.name}: {text}")
    return found


class FleetProcess:
    """``manage.py demo_fleet`` as a process of its own, on the test database."""

    def __init__(self, url: str, place: Path, env: dict[str, str], *args: str) -> None:
        self.log = place.parent / "fleet.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "demo_fleet", "--url", url, "-v2", *args],
                cwd=ROOT,
                env={**env, "PROJEKTOR_DEMO_DIR": str(place)},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(PATIENCE)


@contextmanager
def served(tmp_path: Path, **overrides: str) -> Iterator[tuple[str, dict[str, str]]]:
    """gunicorn on the test database (what a test commits there, it serves): its URL,
    and its environment for the fleet's process."""
    env = harness.environment_on_this_database(
        {"SECRET_KEY": "demo-fleet-only", "REDIS_URL": None, **overrides}
    )
    log = tmp_path / "server.log"
    with harness.gunicorn(env=env, workers=2, threads=8, log_path=log) as server:
        yield f"http://{server.host}:{server.port}", env
