"""The tree's one rule of size, as docs/design.md (layout) says: modules stay under about
450 lines; past that, a package. Every package of the product and its tools is held to
it; migrations are exempt (each carries the SQL it installs)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("coordination", "projektor", "heatmap", "projektor_agent", "benchmarks", "demo")
MODULE_LINES = 450


def modules() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.relative_to(ROOT).parts
    ]


def test_every_module_stays_under_the_cap():
    over = {}
    for path in modules():
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > MODULE_LINES:
            over[str(path.relative_to(ROOT))] = count
    assert not over, f"over {MODULE_LINES} lines (split them by responsibility): {over}"


def test_the_packages_are_every_one_of_the_tree():
    """A new top-level package is held to the cap as well."""
    packages = {
        path.name
        for path in ROOT.iterdir()
        if (path / "__init__.py").is_file() and path.name != "tests"
    }
    assert packages == set(PACKAGES)
