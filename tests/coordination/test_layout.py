"""The API package has one module per resource group, and the filters do not lean on it."""

import ast
from pathlib import Path

import coordination

PACKAGE = Path(coordination.__file__).parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name}


def test_filtersets_depend_on_nothing_in_the_api_package():
    assert not [m for m in imported_modules(PACKAGE / "filtersets.py") if "coordination.api" in m]


def test_one_api_module_per_resource_group():
    modules = {path.stem for path in (PACKAGE / "api").glob("*.py")}
    assert {"sessions", "issues", "file_claims", "messages", "runs"} <= modules
    assert "views" not in modules
