"""Run as ``python -m tests.projektor.operations.backup_writer OUT`` on a SQLite
DATABASE_URL: a writer thread claims files while ``manage.py backup OUT`` runs;
prints the claims counted before and after the backup, and at the end, as JSON."""

import json
import sys
import threading

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from coordination.models import Issue, Project, Workspace  # noqa: E402
from coordination.services import agents, file_claims  # noqa: E402

PATHS_PER_CLAIM = 3
WRITES_AROUND_THE_BACKUP = 20


def main(out: str) -> None:
    workspace = Workspace.objects.create(slug="backup", name="Backup")
    project = Project.objects.create(workspace=workspace, key="p", name="P")
    session = agents.register_session(workspace=workspace, agent_name="writer")
    claimed = 0
    errors: list[str] = []
    lock = threading.Condition()
    stop = threading.Event()

    def write() -> None:
        nonlocal claimed
        n = 0
        while not stop.is_set():
            issue = Issue.objects.create(workspace=workspace, project=project, title=f"i{n}")
            paths = [f"src/{n}/f{k}.py" for k in range(PATHS_PER_CLAIM)]
            try:
                file_claims.claim_files(
                    workspace=workspace, issue_id=issue.pk, paths=paths, session_id=session.pk
                )
            except Exception as error:  # noqa: BLE001 - reported to the test
                errors.append(repr(error))
                break
            n += 1
            with lock:
                claimed = n
                lock.notify_all()
        connection.close()

    def wait_for(count: int) -> None:
        with lock:
            if not lock.wait_for(lambda: claimed >= count or errors, timeout=120):
                raise SystemExit(f"the writer made {claimed} claims, not {count}")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_for(WRITES_AROUND_THE_BACKUP)
        before = claimed
        call_command("backup", out)
        after = claimed
        wait_for(after + WRITES_AROUND_THE_BACKUP)
    finally:
        stop.set()
        writer.join()
    print(json.dumps({"before": before, "after": after, "final": claimed, "errors": errors}))


if __name__ == "__main__":
    main(sys.argv[1])
