"""The request log: one line per request with its id (kept or made, echoed), and an
error as one JSON record with its traceback and the same id."""

import json
import logging
import subprocess
import sys
import time

import pytest
from django.test import Client
from django.urls import path

from coordination.services import keys
from projektor.operations.logs import JsonFormatter, RequestIdFilter, TextFormatter
from tests.conftest import make_client
from tests.projektor.test_settings import ROOT

pytestmark = pytest.mark.django_db


class Lines(logging.Handler):
    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__()
        self.setFormatter(formatter)
        self.addFilter(RequestIdFilter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def json_lines():
    handler = Lines(JsonFormatter())
    loggers = [logging.getLogger("projektor.request"), logging.getLogger("django.request")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler.lines
    for logger in loggers:
        logger.removeHandler(handler)


def crash(request):
    raise RuntimeError("the view broke")


urlpatterns = [path("api/v1/crash/", crash)]


def test_an_incoming_request_id_is_kept_and_logged(api, make_session, json_lines):
    session = make_session("coder-7")
    response = api.post(
        f"/api/v1/sessions/{session.pk}/heartbeat/", headers={"X-Request-ID": "agent-7:call-42"}
    )
    assert response.status_code == 200
    assert response["X-Request-ID"] == "agent-7:call-42"
    [line] = json_lines
    entry = json.loads(line)
    assert entry == {
        "time": entry["time"],
        "level": "INFO",
        "logger": "projektor.request",
        "message": entry["message"],
        "request_id": "agent-7:call-42",
        "event": "request",
        "method": "POST",
        "path": f"/api/v1/sessions/{session.pk}/heartbeat/",
        "route": "api/v1/sessions/<pk>/heartbeat/",
        "status": 200,
        "duration_ms": entry["duration_ms"],
        "workspace": "acme",
        "key": entry["key"],
        "agent": "coder-7",
    }
    assert isinstance(entry["key"], int) and entry["duration_ms"] > 0


@pytest.mark.parametrize("incoming", [None, "", "x" * 129, "two words", "évil\n"])
def test_a_missing_or_unfit_request_id_is_replaced(incoming, json_lines):
    headers = {} if incoming is None else {"X-Request-ID": incoming}
    first = Client().get("/healthz", headers=headers)
    second = Client().get("/healthz", headers=headers)
    made = first["X-Request-ID"]
    assert len(made) == 32 and made != second["X-Request-ID"] and made != incoming
    assert json.loads(json_lines[0])["request_id"] == made


def test_a_refusal_names_the_key_and_workspace_but_not_another_agent(
    api, make_session, make_issue, json_lines
):
    holder, other = make_session("holder"), make_session("other")
    issue = make_issue()
    body = {"session": holder.pk}
    assert api.post(f"/api/v1/issues/{issue.pk}/claim/", body, format="json").status_code == 201
    refused = api.post(f"/api/v1/issues/{issue.pk}/claim/", {"session": other.pk}, format="json")
    assert refused.status_code == 409
    leased, held = (json.loads(line) for line in json_lines)
    assert leased["agent"] == "holder" and leased["route"] == "api/v1/issues/<pk>/claim/"
    assert held["status"] == 409 and held["agent"] is None and held["workspace"] == "acme"


def test_an_agent_keys_line_names_its_agent_even_when_refused(workspace, make_session, json_lines):
    """The key is the actor (invariant 13 (the key is the actor)): its agent, loaded with it, no
    query more."""
    mine, theirs = make_session("coder-1"), make_session("coder-2")
    _, raw = keys.mint_key(workspace=workspace, kind="agent", agent_name="coder-1")
    client = make_client(raw)
    assert client.get("/api/v1/workflow/").status_code == 200
    assert client.post(f"/api/v1/sessions/{theirs.pk}/heartbeat/").status_code == 403
    assert client.post(f"/api/v1/sessions/{mine.pk}/heartbeat/").status_code == 200
    assert [json.loads(line)["agent"] for line in json_lines] == ["coder-1"] * 3


@pytest.mark.urls("tests.projektor.operations.test_requests")
def test_an_error_is_one_json_record_with_its_traceback(json_lines):
    response = Client(raise_request_exception=False).get(
        "/api/v1/crash/", headers={"X-Request-ID": "req-500"}
    )
    assert response.status_code == 500
    error, request = (json.loads(line) for line in json_lines)
    assert all("\n" not in line for line in json_lines)
    assert error["level"] == "ERROR" and error["logger"] == "django.request"
    assert error["request_id"] == "req-500" == request["request_id"]
    assert "Traceback (most recent call last)" in error["exception"]
    assert "RuntimeError: the view broke" in error["exception"]
    assert request["status"] == 500


def test_text_lines_are_readable():
    record = logging.LogRecord(
        "projektor.request", logging.INFO, "", 0, "GET /healthz 200", (), None
    )
    record.request_id = "abc"
    line = TextFormatter().format(record)
    assert line.endswith(" INFO projektor.request [abc] GET /healthz 200")


def test_a_request_log_line_costs_microseconds(tmp_path):
    """What the log adds to a request (docs/operations.md, "Health, metrics, logs"):
    formatting and writing one JSON line. Printed, not asserted: the machine is shared."""
    logger = logging.getLogger("cost-probe")
    logger.propagate = False
    stream = (tmp_path / "log").open("w")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    fields = {"event": "request", "method": "POST", "route": "api/v1/sessions/<pk>/heartbeat/"}
    started = time.perf_counter()
    for _ in range(2000):
        logger.warning("POST /api/v1/sessions/1/heartbeat/ 200", extra={"fields": fields})
    each = (time.perf_counter() - started) / 2000
    logger.removeHandler(handler)
    stream.close()
    print(f"one JSON request line: {each * 1e6:.0f} µs")
    assert (tmp_path / "log").read_text().count("\n") == 2000


def test_json_format_is_chosen_by_the_environment(tmp_path):
    probe = "import logging; logging.getLogger('coordination.probe').warning('our-line')"
    env = {
        "PATH": "/usr/bin:/bin",
        "SECRET_KEY": "x",
        "PROJEKTOR_LOG_FORMAT": "json",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'p.sqlite3'}",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    [line] = [line for line in result.stderr.splitlines() if "our-line" in line]
    assert json.loads(line)["message"] == "our-line"
    bad = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**env, "PROJEKTOR_LOG_FORMAT": "xml"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "PROJEKTOR_LOG_FORMAT must be one of text, json" in bad.stderr
