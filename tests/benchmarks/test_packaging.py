"""The benches and the demo are a checkout's: in a checkout (make run serves the demo),
not in the wheel, and the product runs without them."""

import os
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def test_the_wheel_leaves_the_demo_and_the_benches_out():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    included = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = {
        package
        for package in ("coordination", "heatmap", "projektor", "demo", "benchmarks")
        if any(fnmatch(package, pattern) for pattern in included)
    }
    assert shipped == {"coordination", "heatmap", "projektor"}


def test_in_a_checkout_the_bench_and_demo_commands_are_installed():
    assert "benchmarks" in settings.INSTALLED_APPS
    assert "demo" in settings.INSTALLED_APPS


def test_without_the_benches_and_the_demo_the_product_starts_without_their_commands():
    code = (
        # As if neither were installed, as in a deployment from the wheel.
        "import sys; sys.modules['benchmarks'] = None; sys.modules['demo'] = None\n"
        "import django; django.setup()\n"
        "from django.conf import settings\n"
        "from django.core.management import call_command, get_commands\n"
        "assert not {'benchmarks', 'demo'} & set(settings.INSTALLED_APPS)\n"
        "call_command('check')\n"
        "print(sorted(name for name in get_commands() if 'bench' in name or 'demo' in name))\n"
    )
    env = {"DJANGO_SETTINGS_MODULE": "projektor.settings", "SECRET_KEY": "packaging-test-only"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
