"""With DEBUG off and static files not collected, the deployment check fails, and
gunicorn (gunicorn.conf.py) refuses to start, naming the command that fixes it."""

import os
import subprocess
import sys

from django.core.checks import run_checks
from django.test import Client

from projektor.operations.checks import STATIC_NOT_COLLECTED, uncollected_static_files
from tests.projektor.test_settings import ROOT


def deploy_errors() -> list:
    return run_checks(tags=["projektor"], include_deployment_checks=True)


def test_uncollected_static_files_fail_the_deployment_check(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path
    [error] = deploy_errors()
    assert error.id == STATIC_NOT_COLLECTED and error.is_serious()
    assert "plotly/plotly.min.js" in uncollected_static_files()
    assert "collectstatic" in error.hint
    settings.DEBUG = True
    assert deploy_errors() == []  # runserver serves them from the apps


def test_collected_static_files_pass(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path
    for path in uncollected_static_files():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert deploy_errors() == []
    (tmp_path / "plotly" / "plotly.min.js").unlink()  # an upgrade added one
    [error] = deploy_errors()
    assert "plotly/plotly.min.js" in error.msg


def test_gunicorn_refuses_to_start_without_collected_static_files(tmp_path):
    env = {
        **os.environ,
        "DEBUG": "false",
        "SECRET_KEY": "check-only",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "PROJEKTOR_STATIC_ROOT": str(tmp_path / "static"),
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env["TMPDIR"] = str(tmp_path)  # where gunicorn.conf.py makes its metrics directory
    started = subprocess.run(
        [sys.executable, "-m", "gunicorn", "projektor.wsgi", "--bind=127.0.0.1:0", "--workers=1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode != 0
    assert "projektor.E001" in started.stderr
    assert "python manage.py collectstatic" in started.stderr
    assert "Booting worker" not in started.stderr
    assert not list(tmp_path.glob("projektor-metrics-*"))  # removed on the way out


def test_a_refused_host_answers_json_on_the_api():
    client = Client(HTTP_HOST="evil.example")
    response = client.get("/api/v1/workflow/")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] == "invalid"
    assert "ALLOWED_HOSTS" in response.json()["detail"]
    assert client.post("/mcp", data="{}", content_type="application/json").json()["code"] == (
        "invalid"
    )
    page = client.get("/login/")
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")
