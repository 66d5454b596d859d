"""The REST client: JSON in and out, the server's refusals as exit statuses, and
retries with backoff only where repeating a call cannot do anything twice."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from projektor_agent import __version__
from projektor_agent.config import Config
from projektor_agent.errors import CommandError, Refused, Unreachable, UsageError

TIMEOUT_SECONDS = 20.0
BACKOFF_SECONDS = (0.5, 1.0, 2.0, 4.0)  # between attempts of a call safe to repeat
RETRY_AFTER_CAP_SECONDS = 30.0
REFUSALS = (403, 409, 422)


class Client:
    def __init__(self, config: Config, *, backoff: tuple[float, ...] = BACKOFF_SECONDS) -> None:
        self.config = config
        self.backoff = backoff

    # --- the calls -----------------------------------------------------------------

    def get(self, path: str, query: dict[str, Any] | None = None, **options: Any) -> Any:
        return self.call("GET", path, query=query, idempotent=True, **options)

    def post(self, path: str, body: dict[str, Any] | None = None, **options: Any) -> Any:
        """A POST is repeated only when the caller says it is safe (``idempotent``),
        or when the connection was refused (the request never left)."""
        return self.call("POST", path, body=body, **options)

    def answer(
        self, method: str, path: str, body: dict[str, Any] | None = None, **options: Any
    ) -> tuple[int, Any]:
        """The call's HTTP status beside its answer, where it tells something (201 a
        hold acquired now, 200 one the session had already)."""
        status, answer = self.call(method, path, body=body, with_status=True, **options)
        return int(status), answer

    def call(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        query: dict[str, Any] | None = None,
        idempotent: bool = False,
        retry: bool = True,
        timeout: float = TIMEOUT_SECONDS,
        with_status: bool = False,
    ) -> Any:
        url = self.url(path, query)
        delays = list(self.backoff) if retry else []
        while True:
            try:
                status, answer = self.exchange(method, url, body, timeout)
                return (status, answer) if with_status else answer
            except Unreachable as error:
                never_sent = isinstance(error.__cause__, ConnectionRefusedError)
                if not delays or not (idempotent or never_sent):
                    raise
                wait = delays.pop(0)
                retry_after = getattr(error, "retry_after", None)
                if retry_after is not None:
                    wait = max(wait, min(retry_after, RETRY_AFTER_CAP_SECONDS))
                time.sleep(wait)

    def url(self, path: str, query: dict[str, Any] | None = None) -> str:
        url = self.config.api + path
        if query:
            pairs = {name: value for name, value in query.items() if value is not None}
            url += "?" + urllib.parse.urlencode(pairs)
        return url

    # --- one exchange ----------------------------------------------------------------

    def exchange(
        self, method: str, url: str, body: dict[str, Any] | None, timeout: float
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method, headers=self.headers())
        retry_after: float | None = None
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
            retry_after = seconds(error.headers.get("Retry-After"))
        except urllib.error.URLError as error:
            reason = error.reason
            failure = Unreachable(f"cannot reach {self.config.url}: {reason}")
            if isinstance(reason, BaseException):
                raise failure from reason
            raise failure from None
        except (TimeoutError, OSError, ValueError) as error:  # timeouts, resets
            raise Unreachable(f"cannot reach {self.config.url}: {error}") from error
        parsed = decode(raw)
        if 200 <= status < 300:
            return status, parsed
        raise answer_error(status, parsed, method, url, retry_after)

    def headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.config.api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"projektor/{__version__}",
        }


def decode(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8")) if raw else None
    except ValueError:
        return None


def seconds(header: str | None) -> float | None:
    try:
        return float(header) if header else None
    except ValueError:
        return None


def answer_error(
    status: int, body: Any, method: str, url: str, retry_after: float | None
) -> CommandError:
    """The server's error answer as the command's error, with a sentence that names
    the holder, the limit or the blocker."""
    detail = describe(body) or f"HTTP {status} from {method} {url}"
    if status == 404 and detail.rstrip(".") in ("Not found", "not_found"):
        detail = missing(url) or detail
    if status in REFUSALS:
        return Refused(detail, body=body, http_status=status)
    if status == 429 or status >= 500:
        error = Unreachable(f"the server answered HTTP {status}: {detail}", body=body)
        error.http_status = status
        error.retry_after = retry_after  # type: ignore[attr-defined]
        return error
    if status == 401:
        return UsageError(
            f"{detail} Check PROJEKTOR_API_KEY (or git config projektor.apiKey).",
            body=body,
            http_status=status,
        )
    return UsageError(detail, body=body, http_status=status)


def missing(url: str) -> str | None:
    """What a bare 404 ("Not found.", the server's answer to ``GET /issues/9/``) is
    about, said as the other calls say it: "Issue 9 does not exist."."""
    path = urllib.parse.urlsplit(url).path
    found = re.search(r"/([a-z-]+?)s?/(\d+)/(?:[a-z-]+/)*$", path)
    if found is None:
        return None
    thing = found.group(1).replace("-", " ").capitalize()
    return f"{thing} {found.group(2)} does not exist."


def for_issue(error: CommandError, issue: int) -> CommandError:
    """The error again, its holder named as the holder of ``issue``."""
    if isinstance(error.body, dict) and isinstance(error.body.get("holder"), dict):
        error.message = describe(error.body, issue)
    return error


def describe(body: Any, issue: Any = None) -> str:
    """The server's detail, plus who holds what it refused over."""
    if not isinstance(body, dict):
        return ""
    detail = str(body.get("detail") or body.get("code") or "").strip()
    extra = []
    holder = body.get("holder")
    if isinstance(holder, dict):
        extra.append(f"held by {holder_name(holder, body.get('issue', issue))}")
    for conflict in body.get("conflicts") or []:
        if isinstance(conflict, dict):
            extra.append(conflict_sentence(conflict))
    if body.get("limit") is not None:
        extra.append(f"limit {body['limit']}")
    for blocker in body.get("blocked_by") or []:
        if isinstance(blocker, dict):
            extra.append(f"blocked by issue {blocker.get('id')} ({blocker.get('status')})")
    for hold in body.get("holders") or []:  # a resource's (resource_busy)
        if isinstance(hold, dict):
            extra.append(hold_sentence(hold))
    if "available" in body and "waiting" in body:
        extra.append(f"{body['available']} available, {body['waiting']} waiting")
    return detail + ("" if not extra else " (" + "; ".join(extra) + ")")


def holder_name(holder: dict[str, Any], issue: Any = None) -> str:
    name = f"agent {holder.get('agent') or '?'}, session {holder.get('session')}"
    return f"issue {issue} ({name})" if issue is not None else name


def hold_sentence(hold: dict[str, Any]) -> str:
    """A resource's holder: ``held by agent atlas for issue 12 (1 unit)``."""
    units = hold.get("units")
    issue = f" for issue {hold['issue']}" if hold.get("issue") is not None else ""
    plural = "" if units == 1 else "s"
    return f"held by agent {hold.get('agent') or '?'}{issue} ({units} unit{plural})"


def conflict_sentence(conflict: dict[str, Any]) -> str:
    held = conflict.get("held_path") or conflict.get("path")
    where = f" by its claim of {held}" if held != conflict.get("path") else ""
    agent = conflict.get("agent") or "no live agent"
    return (
        f"{conflict.get('path')} is claimed by issue {conflict.get('issue')} (agent {agent}){where}"
    )
