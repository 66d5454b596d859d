"""The API package has one module per resource group, the filters do not lean on it,
and the import contracts that keep coordination's arrows pointing down stay as strong
as docs/design.md (layout) says: weakening one fails here, not only in lint-imports."""

import ast
import tomllib
from pathlib import Path

import coordination

PACKAGE = Path(coordination.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"

# Highest first: a layer imports only those below it; "a | b" are independent.
LAYERS = ["mcp", "api | admin", "services", "selectors | feed", "db", "models", "liveness"]


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


def coordination_contracts() -> list[dict]:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    return [
        c for c in contracts if "coordination" in str(c.get("containers", c.get("source_modules")))
    ]


def test_the_layers_contract_keeps_the_arrows_pointing_down():
    (layers,) = [c for c in coordination_contracts() if c["type"] == "layers"]
    assert layers["containers"] == ["coordination"]
    assert layers["layers"] == LAYERS


def test_coordination_does_not_import_the_project():
    forbidden = [c for c in coordination_contracts() if c["type"] == "forbidden"]
    assert any(
        c["source_modules"] == ["coordination"] and "projektor" in c["forbidden_modules"]
        for c in forbidden
    )


def test_no_contract_of_coordination_makes_exceptions():
    for contract in coordination_contracts():
        assert not contract.get("ignore_imports"), contract["name"]
        assert contract.get("allow_indirect_imports") in (None, False), contract["name"]


def test_the_floor_and_the_statements_import_nothing_above_them():
    """The liveness predicate imports nothing of coordination (the models stand on it),
    and the statements nothing of coordination but themselves and the path rules (the
    bench's direct ceiling imports them without Django)."""
    assert not [
        m for m in imported_modules(PACKAGE / "liveness.py") if m.startswith("coordination")
    ]
    for path in (PACKAGE / "db" / "sql").glob("*.py"):
        outside = [
            m
            for m in imported_modules(path)
            if m.startswith("coordination")
            and not m.startswith(("coordination.db.sql", "coordination.paths"))
        ]
        assert not outside, path.name
