"""What the generated repository holds: its layout and the text of its first commit.

A few hundred small text files in nested directories (``src/app/<module>/…``,
``tests/<module>/…``, ``docs/<module>/…``) and three hot files that changes tend to
touch (``CHANGELOG.md``, the router ``src/app/urls.py``, the settings module
``src/app/settings.py``), each with a marker line that new entries go just above, as
real changes add to the end of a list: two changes made apart to the same hot file
conflict when one is rebased onto the other. Every Python file under ``src/`` imports,
and each service module (``src/app/<module>/services/<word>.py``) defines a function
others may call, ``<module>_<word>_total``, and its ``check_`` function. The check,
``check.py`` (``check_script``), imports every module of ``src/`` and runs every
``check_`` function, after sleeping ``check_seconds`` (a slow suite's time, without its
CPU; ``WORKBENCH_CHECK_SECONDS`` overrides it): it says each failure on a line of its
own and exits 1.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

try:
    from demo.workbench.check_script import CHECK, CHECK_SCRIPT, CHECK_SECONDS
except ImportError:  # beside agent.py run as a script: its folder is on the path
    from check_script import CHECK, CHECK_SCRIPT, CHECK_SECONDS  # type: ignore[no-redef]

CHANGELOG = "CHANGELOG.md"
ROUTER = "src/app/urls.py"
SETTINGS = "src/app/settings.py"
# Each hot file's marker lines: an agent inserts its entry just above one of them.
HOT = {
    CHANGELOG: ["<!-- new entries above this line -->"],
    ROUTER: ["    # new routes above this line"],
    SETTINGS: ["    # new apps above this line", "    # new features above this line"],
}
ROUTING = "src/app/routing.py"
# What every checkout has besides the files issues work on (never drawn for a plan).
SCAFFOLD = {CHECK, ".gitignore", ROUTING}
MODULES = [
    "accounts",
    "billing",
    "catalog",
    "inventory",
    "notifications",
    "orders",
    "payments",
    "reports",
    "search",
    "shipping",
]
SOURCE_FILES = ["__init__.py", "models.py", "views.py", "forms.py", "serializers.py"]
SERVICE_WORDS = ["export", "import", "rules", "pricing", "audit", "cache", "sync", "limits"]
NOUNS = ["export", "totals", "pagination", "retry", "filters", "permissions", "timeouts", "audit"]


def tree(rng: random.Random, check_seconds: float = CHECK_SECONDS) -> dict[str, str]:
    """Every file of the initial commit, by path (about 300)."""
    files = {"README.md": "# Workbench\n\nA generated repository for Projektor's fleet.\n"}
    for module in MODULES:
        services = rng.sample(SERVICE_WORDS, rng.randint(4, 6))
        names = [f"src/app/{module}/{name}" for name in SOURCE_FILES]
        names += [f"src/app/{module}/services/{word}.py" for word in services]
        names += [f"src/app/{module}/templates/{module}/{word}.html" for word in services[:3]]
        names += [f"tests/{module}/test_{word}.py" for word in ["models", "views", *services]]
        names += [f"docs/{module}/{word}.md" for word in ["index", *services[:4]]]
        for name in names:
            files[name] = cold_text(rng, name)
        for word in services:
            files[f"src/app/{module}/services/{word}.py"] += service_code(module, word)
    files[CHECK] = CHECK_SCRIPT.replace("SECONDS = 10.0", f"SECONDS = {float(check_seconds)!r}")
    files[".gitignore"] = "__pycache__/\n*.pyc\n"
    files[ROUTING] = (
        '"""How a route is declared."""\n\n\ndef route(prefix, target):\n'
        "    return (prefix, target)\n"
    )
    files[CHANGELOG] = (
        "# Changelog\n\n## Unreleased\n\n"
        + HOT[CHANGELOG][0]
        + "\n\n## 1.0.0\n\n- The first release.\n"
    )
    routes = "".join(f'    route("{m}/", "app.{m}.views"),\n' for m in MODULES)
    files[ROUTER] = (
        '"""The application\'s routes."""\n\nfrom app.routing import route'
        f"\n\nurlpatterns = [\n{routes}{HOT[ROUTER][0]}\n]\n"
    )
    apps = "".join(f'    "app.{m}",\n' for m in MODULES)
    features = "".join(f'    "{m}_beta": False,\n' for m in MODULES[:4])
    files[SETTINGS] = (
        '"""The application\'s settings."""\n\nDEBUG = False\n\n'
        f"INSTALLED_APPS = [\n{apps}{HOT[SETTINGS][0]}\n]\n\n"
        f"FEATURES = {{\n{features}{HOT[SETTINGS][1]}\n}}\n"
    )
    return files


def cold_text(rng: random.Random, name: str) -> str:
    prefix = "#" if name.endswith(".py") else ("<!--" if name.endswith(".html") else "")
    suffix = " -->" if prefix == "<!--" else ""
    lines = [f"{prefix} {name}{suffix}".strip()]
    for number in range(1, rng.randint(12, 30)):
        lines.append(f"{prefix} line {number}: {rng.choice(NOUNS)} {rng.randrange(10**6)}{suffix}")
    return "\n".join(line.strip() for line in lines) + "\n"


def function_name(module: str, word: str) -> str:
    """The function a service module defines (``old`` of a rename)."""
    return f"{module}_{word}_total"


def factor(module: str, word: str) -> int:
    return len(module) % 5 + len(word) % 3 + 2


def service_code(module: str, word: str) -> str:
    """A service module's function and its check, the check its one caller."""
    name, times = function_name(module, word), factor(module, word)
    return (
        f"\n\ndef {name}(amount):\n    return amount * {times}\n"
        f"\n\ndef check_{name}():\n    assert {name}(2) == {2 * times}\n"
    )


DEFINITION = re.compile(r"^def (?!check_)(\w+)\(", re.MULTILINE)


def defined_function(source: str) -> str | None:
    """The name of the function a service module defines now (renamed or not)."""
    found = DEFINITION.search(source)
    return found.group(1) if found else None


def module_name(path: str) -> str:
    """``src/app/x/services/y.py`` → ``app.x.services.y``."""
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[1:-1] if parts[-1] == "__init__" else parts[1:])
