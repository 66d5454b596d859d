"""A bench agent over HTTP: one process, one kept-alive connection, one live session.

Standard library only (``http.client``, ``json``): what it measures is the app
behind gunicorn, not a client library.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.workload import AgentPlan, run_agent

API = "/api/v1"
# Long enough for a list of 100 under load; a request slower than this is an error.
REQUEST_TIMEOUT_SECONDS = 60.0
# After a connection error, wait a little before the next request so a dead server
# is not hammered in a tight loop (each error is counted anyway).
ERROR_PAUSE_SECONDS = 0.05


@dataclass(frozen=True)
class HttpTarget:
    host: str
    port: int
    raw_key: str


class HttpClient:
    """One kept-alive connection to the app, authenticated with the bench's key."""

    def __init__(self, target: HttpTarget) -> None:
        self.target = target
        self.headers = {
            "Authorization": f"Bearer {target.raw_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        self.connection: http.client.HTTPConnection | None = None
        self.served = 0  # responses read on the current connection
        self.reconnected = 0

    def connect(self) -> http.client.HTTPConnection:
        if self.connection is None:
            self.connection = http.client.HTTPConnection(
                self.target.host, self.target.port, timeout=REQUEST_TIMEOUT_SECONDS
            )
            self.served = 0
        return self.connection

    def disconnect(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.connection = None

    def call(self, method: str, path: str, payload: Any = None) -> tuple[int, bytes]:
        """One request and its whole response. A kept-alive connection the server
        closed while idle fails before any answer; it is opened again and the request
        sent once more, as any HTTP client does (counted in ``reconnects``)."""
        body = json.dumps(payload).encode() if payload is not None else None
        for attempt in (1, 2):
            connection = self.connect()
            reused = self.served > 0
            try:
                connection.request(method, API + path, body=body, headers=self.headers)
                response = connection.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.disconnect()
                if reused and attempt == 1:
                    self.reconnected += 1
                    continue
                raise
            except (OSError, http.client.HTTPException):
                self.disconnect()
                raise
            self.served += 1
            if response.will_close:
                self.disconnect()
            return response.status, data
        raise AssertionError("unreachable")


class HttpDriver(HttpClient):
    """The API calls an agent makes (docs/api.md), with outcome labels for the tally."""

    def __init__(self, plan: AgentPlan, target: HttpTarget) -> None:
        super().__init__(target)
        self.plan = plan
        self.session_id = 0

    def outcome(self, method: str, path: str, payload: Any = None) -> str:
        """The request's label: its status, ``conflict`` for a file conflict,
        ``409 <code>`` for another refusal, ``error: ...`` without an answer."""
        try:
            status, data = self.call(method, path, payload)
        except (OSError, http.client.HTTPException) as error:
            time.sleep(ERROR_PAUSE_SECONDS)
            return f"error: {error!r}"
        if status == 409:
            code = error_code(data)
            return "conflict" if code == "file_conflict" else f"409 {code}"
        return str(status)

    # --- the driver ------------------------------------------------------------------

    def open(self) -> None:
        status, data = self.call("POST", "/sessions/", {"agent": self.plan.agent_name})
        if status != 201:
            raise RuntimeError(f"registering {self.plan.agent_name}: {status} {data[:300]!r}")
        self.session_id = int(json.loads(data)["id"])

    def close(self) -> None:
        try:
            self.call("POST", f"/sessions/{self.session_id}/end/")
        finally:
            self.disconnect()

    def heartbeat(self) -> str:
        return self.outcome("POST", f"/sessions/{self.session_id}/heartbeat/")

    def claim_issue(self) -> str:
        return self.outcome(
            "POST", f"/issues/{self.plan.issue_id}/claim/", {"session": self.session_id}
        )

    def release_issue(self) -> str:
        return self.outcome(
            "POST", f"/issues/{self.plan.issue_id}/release/", {"session": self.session_id}
        )

    def claim_files(self, paths: list[str]) -> str:
        payload = {"issue": self.plan.issue_id, "session": self.session_id, "paths": paths}
        return self.outcome("POST", "/file-claims/", payload)

    def release_files(self) -> str:
        payload = {"issue": self.plan.issue_id, "session": self.session_id}
        return self.outcome("POST", "/file-claims/release/", payload)

    def list_live_sessions(self) -> str:
        return self.outcome("GET", "/sessions/?live=true")

    def list_ready_issues(self) -> str:
        return self.outcome("GET", "/issues/ready/")

    def statements(self) -> int:
        return 0  # counted in the command's process (``statements``), not here

    def reconnects(self) -> int:
        return self.reconnected


def error_code(data: bytes) -> str:
    try:
        return str(json.loads(data).get("code"))
    except (ValueError, AttributeError):
        return "unparsable"


def main(plan: AgentPlan, target: HttpTarget, barrier: Any, results: Any) -> None:
    """Entry point of a spawned HTTP client process."""
    run_agent(HttpDriver(plan, target), plan, barrier, results)
