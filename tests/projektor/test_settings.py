"""Settings read from the environment: the production settings pass ``check --deploy``,
the embedded SQLite runs in WAL, a throttle rate can be off."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from projektor.settings import env_rate
from tests.api_helpers import V1

PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "k3y-" + "x7Qp2Lm9Zr4Vt8Nw1Ys6Hb0Jd5Fc3Gk" * 2,
    "ALLOWED_HOSTS": "tracker.example.com",
    "PROJEKTOR_HTTPS": "true",
}


def deploy_check(**env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PROJEKTOR_", "SECURE_")) and k not in {"DEBUG", "SECRET_KEY"}
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=Path(settings.BASE_DIR),
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Production settings whose static files are collected (``projektor.E001`` asks for
    them), into a directory of this test's own: the checkout's may be stale or absent."""
    root = tmp_path_factory.mktemp("static")
    env = {**PRODUCTION, "PROJEKTOR_STATIC_ROOT": str(root)}
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=Path(settings.BASE_DIR),
        env={**os.environ, **env},
        check=True,
        timeout=300,
    )
    return env


def test_production_settings_pass_check_deploy(collected):
    result = deploy_check(**collected)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_flags_a_site_not_declared_https():
    """Without PROJEKTOR_HTTPS (plain http, as for local use) the check says what is off."""
    result = deploy_check(**{**PRODUCTION, "PROJEKTOR_HTTPS": "false"})
    assert result.returncode != 0
    flagged = {w for w in ("W004", "W008", "W012", "W016") if f"security.{w}" in result.stderr}
    assert flagged == {"W004", "W008", "W012", "W016"}, result.stderr


ROOT = Path(settings.BASE_DIR)


@pytest.mark.django_db
def test_embedded_sqlite_runs_in_wal_with_immediate_transactions(tmp_path):
    """Writers queue on the busy timeout instead of failing on lock upgrade."""
    probe = (
        "from django.db import connection as c\n"
        "cur = c.cursor(); cur.execute('PRAGMA journal_mode'); print(cur.fetchone()[0])\n"
        "options = c.settings_dict['OPTIONS']\n"
        "print(options['transaction_mode'], options['timeout'])\n"
    )
    assert probed(probe, embedded_sqlite(tmp_path)) == ["wal", "IMMEDIATE", "20"]


def embedded_sqlite(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'p.sqlite3'}", "DEBUG": "true"}


def probed(probe: str, env: dict[str, str]) -> list[str]:
    """What ``probe`` prints, run by ``manage.py shell`` under ``env``'s settings."""
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.split()


@pytest.mark.parametrize(("value", "kept"), [(None, "60"), ("0", "0"), ("300", "300")])
def test_a_connection_is_kept_between_requests_as_long_as_configured(tmp_path, value, kept):
    probe = "from django.db import connection as c; print(c.settings_dict['CONN_MAX_AGE'])"
    env = embedded_sqlite(tmp_path)
    env.pop("PROJEKTOR_CONN_MAX_AGE", None)
    if value is not None:
        env["PROJEKTOR_CONN_MAX_AGE"] = value
    assert probed(probe, env) == [kept]
    env["PROJEKTOR_CONN_MAX_AGE"] = "-1"
    refused = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert refused.returncode != 0 and "PROJEKTOR_CONN_MAX_AGE" in refused.stderr


@pytest.mark.django_db
def test_a_throttle_scope_can_be_off(monkeypatch, settings, api):
    monkeypatch.setenv("PROJEKTOR_THROTTLE_KEY", "off")
    assert env_rate("PROJEKTOR_THROTTLE_KEY", "6000/min") is None
    monkeypatch.setenv("PROJEKTOR_THROTTLE_KEY", "often")
    with pytest.raises(ImproperlyConfigured):
        env_rate("PROJEKTOR_THROTTLE_KEY", "6000/min")
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"key": None, "anon": "1/min"},
    }
    for _ in range(5):  # over any limit: a scope that is off counts nothing
        assert api.get(f"{V1}/workflow/").status_code == 200


@pytest.mark.parametrize("debug", ["true", "false"])
def test_each_log_record_is_printed_once(tmp_path, debug):
    """runserver's "Watching for file changes" line, a server error, our own warnings:
    once each, whether DEBUG adds Django's own console handler or not; a 4xx warning
    not at all (the request log has a line for every request); and runserver's
    request log keeps its timestamp."""
    probe = (
        "import logging\n"
        "logging.getLogger('django.utils.autoreload').info('watching-line')\n"
        "logging.getLogger('django.request').warning('not-found-line')\n"
        "logging.getLogger('django.request').error('server-error-line')\n"
        "logging.getLogger('coordination.probe').warning('our-line')\n"
        "logging.getLogger('django.server').info('request-line')\n"
    )
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'p.sqlite3'}", "DEBUG": debug}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = result.stderr.splitlines()
    for text in ("watching-line", "server-error-line", "our-line"):
        assert sum(line.endswith(f" {text}") for line in lines) == 1, result.stderr
    assert "not-found-line" not in result.stderr
    [request] = [line for line in lines if "request-line" in line]
    assert re.fullmatch(r"\[.+\] request-line", request), request


def test_the_request_lines_can_be_turned_off(tmp_path):
    """``PROJEKTOR_LOG_REQUESTS=false`` (``make run``, beside the demo fleet): no line
    per request, ours or runserver's, but runserver's 5xx lines and every other record
    still print."""
    probe = (
        "import logging\n"
        "logging.getLogger('projektor.request').info('our-request-line')\n"
        "logging.getLogger('django.server').info('request-line')\n"
        "logging.getLogger('django.server').warning('refused-line')\n"
        "logging.getLogger('django.server').error('broken-line')\n"
        "logging.getLogger('django.request').error('server-error-line')\n"
        "logging.getLogger('coordination.probe').warning('our-line')\n"
    )
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'p.sqlite3'}",
        "DEBUG": "true",
        "PROJEKTOR_LOG_REQUESTS": "false",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    for quiet in ("our-request-line", "request-line", "refused-line"):
        assert f" {quiet}" not in result.stderr and f"] {quiet}" not in result.stderr
    for loud in ("broken-line", "server-error-line", "our-line"):
        assert loud in result.stderr, result.stderr
