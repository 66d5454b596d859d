"""The bodies the API reference shows: one small story, told the same way throughout.

Agent coder-1 (session 12) works on issue 7 of project core ("Retry failed webhook
deliveries"): lease 31 with fence 3, claims 88 and 89 on two paths, run 5 on worktree
wt-main. coder-2 (session 14) holds issue 9 and src/webhooks/retry.py with it.
"""

from typing import Any

from drf_spectacular.utils import OpenApiExample

from coordination.services.workflow import get_workflow

ISSUE_ID, SESSION_ID, FENCE = 7, 12, 3
PATHS = ["src/webhooks/retry.py", "tests/webhooks/test_retry.py"]


def at(clock: str) -> str:
    """A time of the story's day, as the API renders times."""
    return f"2026-03-02T{clock}.120431Z"


def shown(name: str, value: Any) -> OpenApiExample:
    """A response body."""
    return OpenApiExample(name, value=value, response_only=True)


def sent(name: str, value: Any) -> OpenApiExample:
    """A request body."""
    return OpenApiExample(name, value=value, request_only=True)


SESSION = {
    "id": SESSION_ID,
    "agent": "coder-1",
    "role": "backend",
    "department": "payments",
    "worktree": "wt-main",
    "status": "active",
    "live": True,
    "started_at": at("09:12:41"),
    "last_heartbeat_at": at("09:14:05"),
    "last_progress_at": at("09:13:50"),
    "stalled": False,
    "progress_note": "tests pass locally",
    "ended_at": None,
    "ttl_seconds": 120,
}
ENDED_SESSION = {**SESSION, "status": "ended", "live": False, "ended_at": at("10:02:17")}
PROJECT = {
    "id": 1,
    "key": "core",
    "name": "Core services",
    "agent_wip_limit": 3,
    "max_lease_age_seconds": None,
    "primary_worktree": "wt-main",
    "created_at": at("08:00:00"),
}
LEASE = {
    "id": 31,
    "issue": ISSUE_ID,
    "session": SESSION_ID,
    "agent": "coder-1",
    "acquired_at": at("09:12:42"),
    "released_at": None,
    "release_reason": None,
    "live": True,
    "aged_out": False,
    "fence": FENCE,
}
RELEASED_LEASE = {**LEASE, "released_at": at("10:02:17"), "release_reason": "released"}
REPORT = {
    "summary": "Failed deliveries are retried with exponential backoff, 5 times at most.",
    "verification": "pytest tests/webhooks: 14 passed; 20 failed deliveries replayed on staging.",
    "pr_link": "https://git.example.com/acme/core/pull/42",
}
ISSUE = {
    "id": ISSUE_ID,
    "project": "core",
    "title": "Retry failed webhook deliveries",
    "description": "Done when a failed delivery is retried with backoff and the retries "
    "show on the delivery's page.",
    "status": "in_progress",
    "priority": 2,
    "requires_filesystem": True,
    "worktree": None,
    "assignee": "coder-1",
    "lease": LEASE,
    "report": None,
    "created_at": at("08:30:00"),
    "updated_at": at("09:12:42"),
    "blocked_by": [],
    "blocks": [15],
    "parent": None,
    "children": {"total": 0, "done": 0},
    "links": [
        {
            "id": 3,
            "type": "blocks",
            "source": ISSUE_ID,
            "target": 15,
            "created_at": at("09:41:00"),
        }
    ],
    "paths": ["webhooks/delivery.py", "webhooks/retry/"],
}
LINK = ISSUE["links"][0]  # type: ignore[index]
REVIEWED_ISSUE = {
    **ISSUE,
    "status": "in_review",
    "lease": None,
    "report": REPORT,
    "updated_at": at("10:02:17"),
}
NEW_ISSUE = {
    "project": "core",
    "title": "Show webhook retries on the delivery page",
    "description": "Done when each retry of a delivery shows with its time and answer.",
    "status": "todo",
    "priority": 3,
    "requires_filesystem": True,
}
NEW_ISSUE_SHOWN = {
    **ISSUE,
    **NEW_ISSUE,
    "id": 15,
    "assignee": None,
    "lease": None,
    "created_at": at("09:40:00"),
    "updated_at": at("09:40:00"),
}
READY_ISSUE = {
    **ISSUE,
    "status": "todo",
    "assignee": None,
    "lease": None,
    "missing": [],
    "collisions": [
        {
            "path": "webhooks/retry/",
            "held_path": "webhooks/retry/policy.py",
            "issue": 12,
            "agent": "atlas",
        }
    ],
}
CLAIMS = [
    {
        "id": 88 + number,
        "path": path,
        "issue": ISSUE_ID,
        "session": SESSION_ID,
        "agent": "coder-1",
        "claimed_at": at("09:12:42"),
        "released_at": None,
        "release_reason": None,
    }
    for number, path in enumerate(PATHS)
]
HOLDER = {"path": PATHS[0], "held_path": PATHS[0], "issue": 9, "session": 14, "agent": "coder-2"}
# coder-3 (session 15) holds the directory src/webhooks/ for issue 11: it holds
# src/webhooks/retry.py too (invariant 11 (overlap)).
DIRECTORY_HOLDER = {
    "path": PATHS[0],
    "held_path": "src/webhooks/",
    "issue": 11,
    "session": 15,
    "agent": "coder-3",
}
CLAIM_CONFLICT = {
    "id": 3,
    "path": PATHS[0],
    "rejected_issue": ISSUE_ID,
    "rejected_session": SESSION_ID,
    "rejected_agent": "coder-1",
    "holding_issue": 9,
    "holding_session": 14,
    "holding_agent": "coder-2",
    "forced": False,
    "occurred_at": at("09:12:42"),
}
WIP_CAP_DENIAL = {
    "id": 2,
    "project": "core",
    "issue": 11,
    "session": 15,
    "agent": "coder-3",
    "limit": 3,
    "occurred_at": at("09:20:03"),
}
HOLD = {
    "id": 52,
    "resource": "db:test",
    "session": SESSION_ID,
    "agent": "coder-1",
    "issue": ISSUE_ID,
    "units": 1,
    "slots": [0],
    "acquired_at": at("09:14:03"),
    "released_at": None,
    "release_reason": None,
    "live": True,
    "fence": 9,
}
RELEASED_HOLD = {**HOLD, "released_at": at("09:20:40"), "release_reason": "released", "live": False}
RESOURCE = {
    "id": 3,
    "name": "db:test",
    "capacity": 2,
    "description": "The test databases test_0 and test_1: use test_<slot>.",
    "in_use": 1,
    "available": 1,
    "waiting": 0,
    "holders": [HOLD],
}
LANDING = {
    "id": 31,
    "project": "WEB",
    "issue": ISSUE_ID,
    "session": SESSION_ID,
    "agent": "coder-1",
    "branch": "projektor/coder-1",
    "commit": "4f2c9e0a7d1b3c5e8f6a2d4b9c1e7f3a5b8d0c2e",
    "lease_fence": 4,
    "paths": PATHS,
    "state": "queued",
    "reason": "",
    "detail": "",
    "place": 2,
    "fence": None,
    "tester": None,
    "landed_commit": "",
    "queued_at": at("09:31:12"),
    "testing_at": None,
    "finished_at": None,
}
TESTING_LANDING = {
    **LANDING,
    "state": "testing",
    "place": 1,
    "fence": 12,
    "tester": {"session": 16, "agent": "coder-2"},
    "testing_at": at("09:31:40"),
}
LANDED = {
    **TESTING_LANDING,
    "state": "landed",
    "place": None,
    "landed_commit": "9b1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d",
    "finished_at": at("09:31:52"),
}
MESSAGE = {
    "id": 40,
    "scope": f"issue:{ISSUE_ID}",
    "body": f"coder-1 started work on issue {ISSUE_ID}.",
    "session": SESSION_ID,
    "agent": "coder-1",
    "created_at": at("09:12:42"),
}
EVENT = {
    "id": 812,
    "type": "lease.released",
    "occurred_at": at("09:31:07"),
    "project": "core",
    "issue": ISSUE_ID,
    "session": SESSION_ID,
    "agent": "coder-1",
    "data": {
        "lease": 31,
        "fence": FENCE,
        "reason": "expired",
        "by": {"session": 14, "agent": "coder-2"},
    },
}
EVENT_PAGE = {"events": [EVENT], "next": 812, "missed": False}
WORKTREE = {
    "id": 1,
    "slug": "wt-main",
    "name": "Main checkout",
    "path": "/srv/acme/core",
    "branch": "main",
    "created_at": at("08:00:00"),
}
RUN = {
    "id": 5,
    "issue": ISSUE_ID,
    "session": SESSION_ID,
    "lock_mode": "exclusive",
    "worktree": "wt-main",
    "fence": 2,
    "status": "running",
    "live": True,
    "error": None,
    "started_at": at("09:13:10"),
    "finished_at": None,
}
FINISHED_RUN = {**RUN, "status": "succeeded", "finished_at": at("09:58:40")}
WORKFLOW = get_workflow()  # the rules themselves, not a copy of them
WEBHOOK = {
    "id": 3,
    "url": "https://ci.example.com/hooks/projektor",
    "types": ["claims.released", "lease.released"],
    "active": True,
    "deactivated_reason": "",
    "created_at": at("08:30:00"),
}
NEW_WEBHOOK = {"url": WEBHOOK["url"], "types": WEBHOOK["types"]}
CREATED_WEBHOOK = {**WEBHOOK, "secret": "q0X4mC2s9yJv7n1Lk3pR8tWd5eZb6aHu0iOf2gNc4xE"}
DEACTIVATED_WEBHOOK = {
    **WEBHOOK,
    "active": False,
    "deactivated_reason": "Delivery 41 (event 812) failed for 24 h, 158 attempts; the last: "
    "HTTP 503: Service Unavailable",
}
DELIVERY = {
    "id": 41,
    "event": 812,
    "type": "lease.released",
    "state": "pending",
    "attempts": 2,
    "last_status": 503,
    "last_error": "HTTP 503: Service Unavailable",
    "next_attempt_at": at("09:31:11"),
    "delivered_at": None,
    "created_at": at("09:31:07"),
}
DELIVERED = {
    **DELIVERY,
    "id": 40,
    "event": 809,
    "type": "lease.granted",
    "state": "delivered",
    "attempts": 1,
    "last_status": 200,
    "last_error": "",
    "next_attempt_at": None,
    "delivered_at": at("09:12:43"),
    "created_at": at("09:12:42"),
}
KEY = {
    "id": 4,
    "name": "coder-1 on issue 7",
    "prefix": "pk_Xq3v9Lm",
    "kind": "agent",
    "agent": "coder-1",
    "can_force": False,
    "workspace": "acme",
    "created_at": at("09:12:30"),
    "expires_at": "2026-03-03T09:12:30Z",
    "revoked_at": None,
}
NEW_KEY = {
    "name": KEY["name"],
    "kind": "agent",
    "agent": "coder-1",
    "expires_at": KEY["expires_at"],
}
CREATED_KEY = {**KEY, "key": "pk_Xq3v9Lm0sT2cV7nB4yK8wR1eU6iO5aZ3dF9gH2jL0pQ"}
REVOKED_KEY = {**KEY, "revoked_at": at("10:02:20")}
MY_KEY = {**KEY, "workspace_name": "Acme"}
