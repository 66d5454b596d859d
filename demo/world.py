"""The demo workspace's fixed cast: projects, worktrees, a source tree, agents.

Everything here is plain data. What happens to it over the simulated month is
decided in ``simulation`` with a seeded random generator, so a seed always tells
the same story.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SLUG = "demo"
NAME = "Demo"

# Shared checkouts. Agents without a worktree of their own write to their
# project's primary one, so two of them can collide there (a busy worktree).
INTEGRATION_WORKTREE = "integration"
SHARED_WORKTREES: tuple[tuple[str, str], ...] = (
    ("api-main", "API checkout"),
    ("web-main", "Web checkout"),
    ("core-main", "Core checkout"),
    (INTEGRATION_WORKTREE, "Integration checkout"),
)

# What the agents share that no path names: the two test databases their tests run
# against, held while the tests run (the scripted agent: ``projektor hold``).
TEST_DB = "test-db"
TEST_DB_CAPACITY = 2
TEST_DB_DESCRIPTION = "The two test databases, test_0 and test_1: held while an agent's tests run."


@dataclass(frozen=True)
class ProjectSpec:
    key: str
    name: str
    wip_limit: int
    primary_worktree: str | None
    areas: tuple[str, ...]  # path prefixes this project's issues edit
    hot_spots: tuple[tuple[str, float], ...]  # shared files, with the chance an issue edits one
    filesystem_share: float  # share of issues that must write to a checkout
    verbs: tuple[str, ...]
    subjects: tuple[str, ...]


PROJECTS: tuple[ProjectSpec, ...] = (
    ProjectSpec(
        key="api",
        name="Public API",
        wip_limit=3,
        primary_worktree="api-main",
        areas=("src/api/", "tests/api/"),
        hot_spots=(
            ("src/api/urls.py", 0.35),
            ("src/core/settings.py", 0.15),
            ("CHANGELOG.md", 0.2),
            ("pyproject.toml", 0.1),
        ),
        filesystem_share=0.5,
        verbs=("Add", "Fix", "Paginate", "Validate", "Harden", "Speed up", "Version"),
        subjects=(
            "the issues endpoint",
            "session heartbeats",
            "file-claim errors",
            "rate limiting",
            "the runs list",
            "API key rotation",
            "webhook delivery",
            "the OpenAPI schema",
            "cursor pagination",
            "bulk claims",
        ),
    ),
    ProjectSpec(
        key="web",
        name="Web app",
        wip_limit=2,
        primary_worktree="web-main",
        areas=("src/web/", "tests/web/"),
        hot_spots=(
            ("src/web/router.ts", 0.4),
            ("package.json", 0.2),
            ("CHANGELOG.md", 0.2),
        ),
        filesystem_share=0.6,
        verbs=("Redesign", "Fix", "Add", "Polish", "Speed up", "Make accessible"),
        subjects=(
            "the board view",
            "issue cards",
            "the heatmap page",
            "the health panel",
            "dark mode",
            "keyboard shortcuts",
            "the login page",
            "drag and drop",
            "the sidebar",
            "filter chips",
        ),
    ),
    ProjectSpec(
        key="core",
        name="Core engine",
        wip_limit=3,
        primary_worktree="core-main",
        areas=("src/core/", "tests/core/"),
        hot_spots=(
            ("src/core/models.py", 0.4),
            ("src/core/settings.py", 0.25),
            ("pyproject.toml", 0.15),
            ("CHANGELOG.md", 0.2),
        ),
        filesystem_share=0.6,
        verbs=("Refactor", "Fix", "Optimise", "Add", "Harden", "Test"),
        subjects=(
            "lease admission",
            "stale reclaim",
            "path normalisation",
            "the workflow engine",
            "worktree locks",
            "liveness checks",
            "the runs migration",
            "event fan-out",
            "settings loading",
            "the connection pool",
        ),
    ),
    ProjectSpec(
        key="docs",
        name="Docs and planning",
        wip_limit=2,
        # No primary worktree: a filesystem issue here needs an agent bound to a
        # worktree, or an explicit one, or its run is skipped as unresolved.
        primary_worktree=None,
        areas=("docs/",),
        hot_spots=(
            ("README.md", 0.3),
            ("CHANGELOG.md", 0.2),
            ("docs/index.md", 0.3),
        ),
        filesystem_share=0.35,
        verbs=("Write", "Update", "Review", "Draft", "Outline"),
        subjects=(
            "the operator guide",
            "the agent guide",
            "the deploy guide",
            "the file-claims ADR",
            "the FAQ",
            "the architecture overview",
            "the release notes",
            "the Q3 roadmap",
            "the API reference",
            "the onboarding checklist",
        ),
    ),
)

PROJECTS_BY_KEY: dict[str, ProjectSpec] = {spec.key: spec for spec in PROJECTS}

SOURCE_TREE: tuple[str, ...] = (
    # top level
    "README.md",
    "CHANGELOG.md",
    "pyproject.toml",
    "package.json",
    "Makefile",
    # api
    "src/api/__init__.py",
    "src/api/urls.py",
    "src/api/auth.py",
    "src/api/errors.py",
    "src/api/pagination.py",
    "src/api/schema.py",
    "src/api/throttling.py",
    "src/api/serializers/issues.py",
    "src/api/serializers/sessions.py",
    "src/api/serializers/claims.py",
    "src/api/views/issues.py",
    "src/api/views/projects.py",
    "src/api/views/sessions.py",
    "src/api/views/leases.py",
    "src/api/views/file_claims.py",
    "src/api/views/runs.py",
    "src/api/views/messages.py",
    "src/api/webhooks.py",
    # web
    "src/web/app.ts",
    "src/web/router.ts",
    "src/web/api-client.ts",
    "src/web/store.ts",
    "src/web/components/Board.tsx",
    "src/web/components/IssueCard.tsx",
    "src/web/components/IssueDetail.tsx",
    "src/web/components/Heatmap.tsx",
    "src/web/components/HealthPanel.tsx",
    "src/web/components/Sidebar.tsx",
    "src/web/components/Login.tsx",
    "src/web/components/Filters.tsx",
    "src/web/pages/index.tsx",
    "src/web/pages/issue.tsx",
    "src/web/pages/settings.tsx",
    "src/web/styles/main.css",
    "src/web/styles/theme.css",
    "src/web/styles/board.css",
    # core
    "src/core/__init__.py",
    "src/core/models.py",
    "src/core/settings.py",
    "src/core/db.py",
    "src/core/events.py",
    "src/core/liveness.py",
    "src/core/paths.py",
    "src/core/workflow.py",
    "src/core/services/leases.py",
    "src/core/services/claims.py",
    "src/core/services/sessions.py",
    "src/core/services/runs.py",
    "src/core/services/messages.py",
    "src/core/services/worktrees.py",
    "src/core/admin.py",
    "src/core/signals.py",
    "src/core/migrations/0001_initial.py",
    "src/core/migrations/0002_claims.py",
    "src/core/migrations/0003_runs.py",
    # docs
    "docs/index.md",
    "docs/architecture.md",
    "docs/api.md",
    "docs/deploy.md",
    "docs/faq.md",
    "docs/roadmap.md",
    "docs/guides/agents.md",
    "docs/guides/operators.md",
    "docs/guides/managers.md",
    "docs/adr/0001-leases.md",
    "docs/adr/0002-file-claims.md",
    "docs/adr/0003-worktrees.md",
    "docs/adr/0004-runs.md",
    "docs/guides/reviewers.md",
    "docs/reference/cli.md",
    "docs/reference/settings.md",
    "docs/reference/errors.md",
    "docs/reference/webhooks.md",
    "docs/tutorials/first-agent.md",
    "docs/tutorials/fleet.md",
    # tests
    "tests/conftest.py",
    "tests/api/test_issues.py",
    "tests/api/test_sessions.py",
    "tests/api/test_claims.py",
    "tests/api/test_runs.py",
    "tests/web/board.test.ts",
    "tests/web/heatmap.test.ts",
    "tests/web/router.test.ts",
    "tests/core/test_leases.py",
    "tests/core/test_claims.py",
    "tests/core/test_liveness.py",
    "tests/core/test_workflow.py",
)

HOT_SPOTS: tuple[str, ...] = tuple(
    sorted({path for spec in PROJECTS for path, _ in spec.hot_spots})
)


def area_files(spec: ProjectSpec) -> tuple[list[str], list[str]]:
    """The project's own files, split into code/docs and tests; hot spots excluded,
    since whether an issue edits one is drawn separately."""
    own = [path for path in SOURCE_TREE if path.startswith(spec.areas) and path not in HOT_SPOTS]
    tests = [path for path in own if path.startswith("tests/")]
    return [path for path in own if path not in tests], tests


def draw_footprint(rng: random.Random, spec: ProjectSpec) -> tuple[str, ...]:
    """The files an issue of ``spec`` will claim: a few of its own, perhaps a test,
    perhaps some of the shared hot spots everyone wants."""
    code, tests = area_files(spec)
    chosen = rng.sample(code, rng.randint(3, 6))
    if tests and rng.random() < 0.6:
        chosen.append(rng.choice(tests))
    chosen += [path for path, chance in spec.hot_spots if rng.random() < chance]
    return tuple(sorted(set(chosen)))


@dataclass(frozen=True)
class Profile:
    role: str
    department: str
    home: str  # the project this kind of agent mostly works in


PROFILES: tuple[Profile, ...] = (
    Profile(role="backend", department="platform", home="core"),
    Profile(role="api", department="platform", home="api"),
    Profile(role="frontend", department="product", home="web"),
    Profile(role="writer", department="docs", home="docs"),
    Profile(role="qa", department="quality", home="api"),
    Profile(role="devops", department="infra", home="core"),
)

AGENT_NAMES: tuple[str, ...] = (
    "atlas",
    "birch",
    "cobalt",
    "delta",
    "ember",
    "fable",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kestrel",
    "lumen",
    "marlin",
    "nova",
    "onyx",
    "pixel",
    "quartz",
    "raven",
    "sable",
    "tango",
    "umber",
    "vesper",
    "willow",
    "zephyr",
)


@dataclass(frozen=True)
class AgentSpec:
    name: str
    profile: Profile
    worktree: str | None  # the agent's own checkout, bound at registration


def own_worktree(name: str) -> str:
    return f"wt-{name}"


def draw_roster(rng: random.Random, count: int) -> list[AgentSpec]:
    """``count`` agents cycling through the profiles; about half get a checkout of
    their own. The first is always unbound and the second always bound, so both
    kinds of run resolution happen even in a tiny fleet."""
    roster = []
    for index in range(count):
        base = AGENT_NAMES[index % len(AGENT_NAMES)]
        name = base if index < len(AGENT_NAMES) else f"{base}-{index // len(AGENT_NAMES) + 1}"
        bound = index == 1 or (index != 0 and rng.random() < 0.5)
        roster.append(
            AgentSpec(
                name=name,
                profile=PROFILES[index % len(PROFILES)],
                worktree=own_worktree(name) if bound else None,
            )
        )
    return roster


def draw_title(rng: random.Random, spec: ProjectSpec) -> str:
    return f"{rng.choice(spec.verbs)} {rng.choice(spec.subjects)}"


DONE_WHEN = (
    "Done when the tests cover it and the docs say how to use it.",
    "Done when the behaviour matches the spec and CI is green.",
    "Done when a reviewer can reproduce the before and after.",
    "Done when the change ships behind no flag and nothing regresses.",
)
