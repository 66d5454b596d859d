"""What the runs' API tests share: the fields of a run, and a dispatch through the
API."""

from tests.api_helpers import post

RUN_FIELDS = {
    "id",
    "live",
    "issue",
    "session",
    "lock_mode",
    "worktree",
    "fence",
    "status",
    "error",
    "started_at",
    "finished_at",
}


def dispatch(client, session, issue):
    return post(client, "/runs/", {"session": session.pk, "issue": issue.pk})
