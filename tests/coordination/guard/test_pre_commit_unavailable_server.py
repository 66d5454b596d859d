"""The pre-commit guard without an answer: a server it cannot reach, or one that
answers 5xx or 429, is warned of and the commit goes through; strict mode refuses.
Nothing staged needs no server."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.coordination.conftest import claim_paths
from tests.coordination.guard.guard_helpers import (
    HOOK,
    LIVE,
    closed_port,
)

# --- the hook in a real repository ---------------------------------------------------------


@LIVE
def test_an_unreachable_server_warns_and_lets_the_commit_through(
    guarded, workspace, mine_and_theirs
):
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["src/a.py"], coder)
    guarded.env.update(PROJEKTOR_URL=f"http://127.0.0.1:{closed_port()}", PROJEKTOR_ISSUE="1")
    guarded.write("src/a.py")

    result = guarded.commit()

    assert result.returncode == 0
    assert "projektor pre-commit: warning: cannot reach http://127.0.0.1:" in result.stderr
    assert "Committing without checking file claims" in result.stderr
    assert guarded.commits() == 2


@pytest.mark.parametrize("how", ["env", "git config"])
@LIVE
def test_strict_mode_refuses_when_the_server_is_unreachable(guarded, mine_and_theirs, how):
    mine, _, _ = mine_and_theirs
    guarded.env.update(PROJEKTOR_URL=f"http://127.0.0.1:{closed_port()}", PROJEKTOR_ISSUE="1")
    if how == "env":
        guarded.env["PROJEKTOR_GUARD_STRICT"] = "1"
    else:
        guarded.git("config", "projektor.strict", "true")
    guarded.write("src/a.py")

    result = guarded.commit()

    assert result.returncode != 0
    assert "commit refused: cannot reach" in result.stderr and "(strict mode)" in result.stderr
    assert guarded.commits() == 1
    if how == "git config":  # an environment "off" wins over git config
        guarded.env["PROJEKTOR_GUARD_STRICT"] = "0"
        assert guarded.commit().returncode == 0


def test_nothing_staged_needs_no_server(checkout):
    hooks = checkout.root / ".git" / "hooks"
    (hooks / "pre-commit").write_bytes(HOOK.read_bytes())
    (hooks / "pre-commit").chmod(0o755)
    checkout.env.update(PROJEKTOR_URL=f"http://127.0.0.1:{closed_port()}", PROJEKTOR_ISSUE="1")
    checkout.env.update(PROJEKTOR_API_KEY="k", PROJEKTOR_GUARD_STRICT="1")
    result = checkout.git("commit", "-q", "--allow-empty", "-m", "empty", check=False)
    assert result.returncode == 0 and result.stderr == ""


# --- a server that answers 5xx or 429 ------------------------------------------------------


@pytest.fixture
def failing_server() -> Iterator[tuple[str, list[int]]]:
    """A stand-in server answering each POST with the next status of ``statuses``."""
    statuses: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status = statuses.pop(0)
            body = json.dumps({"code": "unavailable", "detail": "Database down."}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", statuses
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_failing_server_warns_and_strict_refuses(checkout, failing_server, status):
    url, statuses = failing_server
    checkout.env.update(PROJEKTOR_URL=url, PROJEKTOR_API_KEY="k", PROJEKTOR_ISSUE="1")
    checkout.write("src/a.py")

    statuses.append(status)
    lenient = checkout.run_hook()
    assert lenient.returncode == 0
    assert f"warning: the server at {url}/api/v1/file-claims/check/ answered HTTP {status}" in (
        lenient.stderr
    )

    statuses.append(status)
    checkout.env["PROJEKTOR_GUARD_STRICT"] = "yes"
    strict = checkout.run_hook()
    assert strict.returncode == 1 and "commit refused: the server at" in strict.stderr
