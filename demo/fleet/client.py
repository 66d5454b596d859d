"""The reviewer's side of HTTP, and the tally of every answer it got.

The reviewer is a person, logged in to the site with a session cookie and the CSRF
token on writes (docs/api.md, Auth); the runners speak for themselves. Every answer,
and every request that got none, is counted in the ``Tally``: the fleet's promise is
that the server never answers 5xx, and the tally is how the command checks it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx

API = "/api/v1"
TIMEOUT_SECONDS = 30.0  # a request waiting on SQLite's write lock (20 s) still answers
LONGEST_BACKOFF_SECONDS = 10.0  # after a 429 or while the server does not answer
NO_ANSWER = 0  # the status tallied for a request that got no answer at all


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any  # the parsed JSON, or None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def code(self) -> str | None:
        """The error's ``code`` (docs/api.md, Errors), if it is one."""
        if isinstance(self.body, dict) and not self.ok:
            code = self.body.get("code")
            return str(code) if code is not None else None
        return None


class Tally:
    """Every status the fleet got, per call (``POST /issues/{id}/claim/``), thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[tuple[str, int]] = Counter()
        self.refusals: Counter[str] = Counter()  # 4xx by error code
        self.failures: list[str] = []  # 5xx and requests without an answer, described

    def record(self, label: str, answer: Answer | None, failure: str = "") -> None:
        status = NO_ANSWER if answer is None else answer.status
        with self.lock:
            self.calls[(label, status)] += 1
            if answer is not None and 400 <= status < 500:
                self.refusals[answer.code or str(status)] += 1
            if answer is None or status >= 500:
                self.failures.append(
                    failure or f"{label}: {status} {answer.body if answer else ''}"
                )

    def statuses(self) -> Counter[int]:
        with self.lock:
            total: Counter[int] = Counter()
            for (_, status), count in self.calls.items():
                total[status] += count
            return total

    def server_errors(self) -> dict[tuple[str, int], int]:
        with self.lock:
            return {call: n for call, n in self.calls.items() if call[1] >= 500}


class Client:
    """One actor's connection to the server (kept alive), its answers tallied."""

    def __init__(
        self, base_url: str, tally: Tally, stop: threading.Event, headers: dict[str, str]
    ) -> None:
        self.tally = tally
        self.stop = stop
        self.http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Accept": "application/json", **headers},
            timeout=TIMEOUT_SECONDS,
        )

    def close(self) -> None:
        self.http.close()

    def extra_headers(self, method: str) -> dict[str, str]:
        return {}

    def call(
        self, method: str, path: str, payload: Any = None, *, label: str = ""
    ) -> Answer | None:
        """One API request; ``None`` if the server did not answer (then the actor waits
        a little: a restarting server is not hammered). A 429 waits its Retry-After."""
        label = f"{method} {label or path}"
        try:
            response = self.http.request(
                method,
                API + path,
                json=payload if method != "GET" else None,
                headers=self.extra_headers(method),
            )
        except httpx.HTTPError as error:
            self.tally.record(label, None, f"{label}: no answer ({error!r})")
            self.pause(1.0)
            return None
        answer = Answer(status=response.status_code, body=parsed(response))
        self.tally.record(label, answer)
        if answer.status == 429:
            self.pause(float(response.headers.get("Retry-After", "1") or 1))
        return answer

    def get(self, path: str, *, label: str = "") -> Answer | None:
        return self.call("GET", path, label=label)

    def post(self, path: str, payload: Any = None, *, label: str = "") -> Answer | None:
        return self.call("POST", path, {} if payload is None else payload, label=label)

    def pause(self, seconds: float) -> None:
        self.stop.wait(min(max(seconds, 0.0), LONGEST_BACKOFF_SECONDS))


class PersonClient(Client):
    """A person logged in to the site: the session cookie, the workspace named in a
    header, and the CSRF token (the cookie's value) on every write."""

    def __init__(self, base_url: str, tally: Tally, stop: threading.Event, workspace: str) -> None:
        super().__init__(base_url, tally, stop, {"X-Projektor-Workspace": workspace})

    def log_in(self, username: str, password: str) -> bool:
        """The login form, as a browser fills it in; True once the session cookie is set."""
        try:
            self.http.get("/login/")
            token = self.http.cookies.get("csrftoken") or ""
            response = self.http.post(
                "/login/",
                data={"username": username, "password": password, "csrfmiddlewaretoken": token},
                headers={"Referer": f"{self.http.base_url}/login/"},
            )
        except httpx.HTTPError as error:
            self.tally.record("POST /login/", None, f"POST /login/: no answer ({error!r})")
            return False
        self.tally.record("POST /login/", Answer(status=response.status_code, body=None))
        return response.status_code == 302 and "sessionid" in self.http.cookies

    def extra_headers(self, method: str) -> dict[str, str]:
        if method in ("GET", "HEAD", "OPTIONS"):
            return {}
        return {"X-CSRFToken": self.http.cookies.get("csrftoken") or ""}


def parsed(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def wait_for_server(base_url: str, stop: threading.Event, timeout: float) -> bool:
    """Poll ``/healthz`` until the server answers 200 (True), or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=base_url.rstrip("/"), timeout=2.0) as http:
        while not stop.is_set():
            try:
                if http.get("/healthz").status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            if time.monotonic() >= deadline:
                return False
            stop.wait(0.25)
    return False
