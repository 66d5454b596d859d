"""The package runs on any machine an agent runs on: the standard library only,
Python 3.9's syntax, nothing of Django or of the server's packages."""

import ast
import sys
from pathlib import Path

import projektor_agent

PACKAGE = Path(projektor_agent.__file__).parent
MODULE_LINES = 450


def modules():
    return sorted(PACKAGE.glob("*.py"))


def test_every_module_parses_as_python_3_9_and_stays_short():
    for module in modules():
        source = module.read_text(encoding="utf-8")
        ast.parse(source, filename=str(module), feature_version=(3, 9))
        assert len(source.splitlines()) <= MODULE_LINES, module.name


def test_it_imports_only_the_standard_library_and_itself():
    imported = set()
    for module in modules():
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{module.name}: no relative imports"
                imported.add((node.module or "").split(".")[0])
    assert imported - {"projektor_agent"} <= set(sys.stdlib_module_names)


def test_annotations_are_never_evaluated_at_runtime():
    """``X | None`` is 3.10 syntax at runtime: every module defers its annotations."""
    for module in modules():
        source = module.read_text(encoding="utf-8")
        if "def " in source:
            assert "from __future__ import annotations" in source, module.name
