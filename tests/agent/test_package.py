"""The package runs on any machine an agent runs on: the standard library only,
Python 3.9's syntax, nothing of Django or of the server's packages."""

import ast
import sys
from pathlib import Path

import projektor_agent
from tests.test_layout import MODULE_LINES

PACKAGE = Path(projektor_agent.__file__).parent


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


def imports_of(module):
    """The modules ``module`` imports, by their full names."""
    names = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_runner_is_imported_by_the_parser_alone():
    """``projektor run`` reads top to bottom: the runner hands its context down to the
    unit, the scan, the checkout, the integration; none of them reaches back into it."""
    importers = {m.name for m in modules() if "projektor_agent.runner" in imports_of(m)}
    assert importers == {"cli.py"}


UNIT_MODULES = ("unit.py", "scan.py", "integrate.py", "checkout.py", "handin.py", "context.py")


def test_what_a_unit_is_given_is_typed():
    """No ``Any`` in the signatures of the unit's modules, but for the server's JSON
    objects (``dict[str, Any]``): what they are handed, mypy sees."""
    untyped = []
    for name in UNIT_MODULES:
        tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            arguments = node.args
            every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
            every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
            annotations = [a.annotation for a in every] + [node.returns]
            for annotation in annotations:
                text = ast.unparse(annotation) if annotation is not None else ""
                if "Any" in text.replace("dict[str, Any]", ""):
                    untyped.append(f"{name}: {node.name}: {text}")
    assert untyped == []
