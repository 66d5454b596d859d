"""A git repository generated from a seed, and the plan of the issues worked on it.

    from demo.workbench import repository
    plan = repository.create(Path("/tmp/repo"), seed=7, issues=12)
    plan.save(Path("/tmp/plan.json"))  # what the scripted agent reads (agent.py)

The repository: a few hundred small text files in nested directories (``src/app/<module>/
…``, ``tests/<module>/…``, ``docs/<module>/…``) and three hot files that changes tend
to touch (``CHANGELOG.md``, the router ``src/app/urls.py``, the settings module
``src/app/settings.py``), each with a marker line that new entries go just above, as
real changes add to the end of a list: two changes made apart to the same hot file
conflict when one is rebased onto the other. Every Python file under ``src/`` imports,
and each service module (``src/app/<module>/services/<word>.py``) defines a function
others may call, ``<module>_<word>_total``, and its ``check_`` function. The check,
``check.py`` (``CHECK``), imports every module of ``src/`` and runs every ``check_``
function, after sleeping ``check_seconds`` (a slow suite's time, without its CPU;
``WORKBENCH_CHECK_SECONDS`` overrides it): it says each failure on a line of its own and
exits 1. One commit on ``main``, byte for byte the same for the same seed and check
seconds (fixed identity and dates).

The plan, drawn from the same seed: M issues, each with a title, a description, its
declared files (``paths``: what the issue says it will touch), a few dependencies
(``blocked_by``: earlier issues' keys), and how its agent behaves: undeclared extra
edits drawn from a skewed hot-spot distribution (the hot files first), an alternative
file for each (what the agent edits instead when the extra one is refused), how long it
works (sometimes longer than the session TTL), and whether its first attempt crashes
(``exit``: exit status 1; ``sigkill``: SIGKILL of itself) after ``crash_after`` edits.
Every plan has at least one crash, one dependency and one hot file shared by several
issues, whatever its size. Issues have a ``key`` (1…M); ``id`` is the server's id, set
by whoever creates them (``Plan.assign``) before the agents run.

Semantic conflicts: pairs of issues (``semantic``, one pair for every ``SEMANTIC_EVERY``
issues, the first at keys 1 and 2, each pair on adjacent keys) that touch different
files and pass the check alone but fail it together. The *rename* renames a service
module's function (``old`` → ``new``) and every caller it finds in its checkout; the
*call*, in another module, adds a function that calls it by the name it finds in the
source and a ``check_`` function for it. Made apart, each passes; both landed, the
call names a function that is no more. The call made again after the rename landed
(or the rename after the call) passes. Pair members declare exactly their file and
make no other edit (so nothing but the semantics stands between them), never crash
and never block each other.
"""

from __future__ import annotations

import json
import keyword
import os
import random
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

try:
    from demo.workbench.check_script import CHECK, CHECK_SCRIPT, CHECK_SECONDS
except ImportError:  # beside agent.py run as a script: its folder is on the path
    from check_script import CHECK, CHECK_SCRIPT, CHECK_SECONDS  # type: ignore[no-redef]

BASE = "main"
CHANGELOG = "CHANGELOG.md"
ROUTER = "src/app/urls.py"
SETTINGS = "src/app/settings.py"
# Each hot file's marker lines: an agent inserts its entry just above one of them.
HOT = {
    CHANGELOG: ["<!-- new entries above this line -->"],
    ROUTER: ["    # new routes above this line"],
    SETTINGS: ["    # new apps above this line", "    # new features above this line"],
}
# How the undeclared edits fall: the hot files take most of them (the rest go to the
# other files, by a Zipf law over a seeded ranking).
HOT_WEIGHTS = {CHANGELOG: 0.30, ROUTER: 0.20, SETTINGS: 0.15}
ROUTING = "src/app/routing.py"
# What every checkout has besides the files issues work on (never drawn for a plan).
SCAFFOLD = {CHECK, ".gitignore", ROUTING}
SEMANTIC_EVERY = 12  # a semantic pair for each this many issues (one at least, from two)
# Where a semantic pair's call goes: one of the calling module's own source files.
CALLER_FILES = ["views.py", "models.py", "forms.py", "serializers.py"]
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
VERBS = ["Add", "Fix", "Refactor", "Speed up", "Document", "Validate", "Log", "Rename"]
NOUNS = ["export", "totals", "pagination", "retry", "filters", "permissions", "timeouts", "audit"]
IDENTITY = {
    "GIT_AUTHOR_NAME": "Workbench",
    "GIT_AUTHOR_EMAIL": "workbench@example.com",
    "GIT_COMMITTER_NAME": "Workbench",
    "GIT_COMMITTER_EMAIL": "workbench@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
}


@dataclass
class PlanIssue:
    key: int
    title: str
    description: str
    paths: list[str]  # declared: what the issue says it will touch
    extra: list[str]  # undeclared edits the agent makes besides
    alternatives: list[str]  # per extra: the file edited instead when it is refused
    blocked_by: list[int]  # keys of earlier issues
    work_seconds: float  # spread between the edits
    crash: str | None = None  # "exit" or "sigkill", on the first attempt only
    crash_after: int = 1  # edits made before the crash
    id: int | None = None  # the server's id, once created there
    # A semantic pair's member: {"pair", "role": "rename"|"call", "path", "module", …}
    semantic: dict[str, Any] | None = None


@dataclass
class Plan:
    seed: int
    base: str
    ttl: float  # the session TTL the long workers outlast
    hot: dict[str, list[str]]
    issues: list[PlanIssue] = field(default_factory=list)

    def assign(self, ids: dict[int, int]) -> None:
        """The server's id of each issue, by key."""
        for issue in self.issues:
            issue.id = ids[issue.key]

    def save(self, path: Path) -> None:
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(asdict(self), indent=1) + "\n", encoding="utf-8")
        os.replace(temporary, path)  # an agent never reads half a plan

    @classmethod
    def load(cls, path: Path) -> Plan:
        raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        issues = [PlanIssue(**issue) for issue in raw.pop("issues")]
        return cls(**raw, issues=issues)

    def pairs(self) -> dict[int, list[PlanIssue]]:
        """The semantic pairs, by number: [the rename, the call]."""
        found: dict[int, list[PlanIssue]] = {}
        for issue in self.issues:
            if issue.semantic:
                found.setdefault(int(issue.semantic["pair"]), []).append(issue)
        for members in found.values():
            members.sort(key=lambda issue: issue.semantic["role"] != "rename")  # type: ignore[index]
        return found

    def hot_sharing(self) -> dict[str, list[int]]:
        """Each hot file and the keys of the issues that edit it (declared or not)."""
        return {
            path: [i.key for i in self.issues if path in i.paths or path in i.extra]
            for path in self.hot
        }


# --- the repository ------------------------------------------------------------------------


def create(
    path: Path,
    seed: int,
    issues: int = 12,
    *,
    ttl: float = 8.0,
    crash_rate: float = 0.15,
    long_rate: float = 0.15,
    extra_rate: float = 0.6,
    dependency_rate: float = 0.25,
    work_seconds: tuple[float, float] = (1.0, 3.0),
    check_seconds: float = CHECK_SECONDS,
) -> Plan:
    """Write the repository at ``path`` (a new or empty directory) and return its plan."""
    if issues < 1:
        raise ValueError("a plan needs at least one issue")
    path.mkdir(parents=True, exist_ok=True)
    if any(path.iterdir()):
        raise ValueError(f"{path} is not empty")
    rng = random.Random(seed)
    files = tree(rng, check_seconds)
    for relative, text in files.items():
        target = path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    git(path, "init", "-q", "-b", BASE)
    git(path, "config", "user.name", IDENTITY["GIT_AUTHOR_NAME"])
    git(path, "config", "user.email", IDENTITY["GIT_AUTHOR_EMAIL"])
    git(path, "add", "-A")
    git(path, "commit", "-q", "--no-verify", "-m", "Initial commit")
    cold = sorted(name for name in files if name not in HOT and name not in SCAFFOLD)
    plan = Plan(seed=seed, base=BASE, ttl=ttl, hot={k: list(v) for k, v in HOT.items()})
    plan.issues = draw_issues(
        rng,
        cold,
        issues,
        ttl=ttl,
        crash_rate=crash_rate,
        long_rate=long_rate,
        extra_rate=extra_rate,
        dependency_rate=dependency_rate,
        work_seconds=work_seconds,
    )
    return plan


def base_commit(path: Path) -> str:
    """The repository's first commit: what every run's commits on ``main`` follow."""
    return git(path, "rev-list", "--max-parents=0", BASE).split()[0]


def git(path: Path, *args: str) -> str:
    env = {**os.environ, **IDENTITY, "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(
        ["git", *args], cwd=path, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {path}: {result.stderr.strip()}")
    return result.stdout


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


# --- the plan --------------------------------------------------------------------------------


def draw_issues(
    rng: random.Random,
    cold: list[str],
    count: int,
    *,
    ttl: float,
    crash_rate: float,
    long_rate: float,
    extra_rate: float,
    dependency_rate: float,
    work_seconds: tuple[float, float],
) -> list[PlanIssue]:
    ranking = rng.sample(cold, len(cold))  # the Zipf ranking of the other files
    drawn: list[PlanIssue] = []
    for key in range(1, count + 1):
        module = rng.choice(MODULES)
        own = [name for name in cold if f"/{module}/" in name]
        paths = sorted(rng.sample(own, rng.randint(1, 3)))
        if rng.random() < 0.35:  # a new view, setting or entry, said up front
            paths.append(rng.choice(list(HOT)))
        extra: list[str] = []
        while rng.random() < (extra_rate if not extra else extra_rate / 3):
            candidate = hot_spot(rng, ranking)
            if candidate not in paths and candidate not in extra:
                extra.append(candidate)
        alternatives = [rng.choice([n for n in own if n not in paths]) for _ in extra]
        earlier = [issue.key for issue in drawn]
        blocked_by = [rng.choice(earlier)] if earlier and rng.random() < dependency_rate else []
        seconds = round(rng.uniform(*work_seconds), 2)
        if rng.random() < long_rate:
            seconds = round(ttl * rng.uniform(1.2, 1.5), 2)
        crash = None
        if rng.random() < crash_rate:
            crash = rng.choice(["exit", "sigkill"])
        verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
        drawn.append(
            PlanIssue(
                key=key,
                title=f"W{key}: {verb} {noun} in {module}",
                description=f"{verb} the {noun} of {module}. Done when its files say so.",
                paths=paths,
                extra=extra,
                alternatives=alternatives,
                blocked_by=blocked_by,
                work_seconds=seconds,
                crash=crash,
                crash_after=1 if len(paths) + len(extra) > 1 else 0,
            )
        )
    semantic_pairs(rng, drawn, cold)
    every_ingredient(drawn)
    return drawn


def module_of(issue: PlanIssue) -> str:
    for path in issue.paths:
        for part in Path(path).parts:
            if part in MODULES:
                return part
    return MODULES[0]


def semantic_pairs(rng: random.Random, issues: list[PlanIssue], cold: list[str]) -> None:
    """Adjacent issues made semantic pairs: keys 1 and 2, then every ``SEMANTIC_EVERY``.
    The rename takes a service module of its issue's module; the call a source file of
    its own (another module when the two issues' modules are the same)."""
    used: set[str] = set()  # each pair renames a function of its own
    for number, start in enumerate(range(0, len(issues) - 1, SEMANTIC_EVERY), start=1):
        rename, call = issues[start], issues[start + 1]
        free = [
            n
            for n in cold
            if "/services/" in n
            and n.startswith("src/app/")
            and not keyword.iskeyword(Path(n).stem)
            and n not in used
        ]
        if not free:
            break  # every function renamed already: no more pairs
        own = [n for n in free if n.startswith(f"src/app/{module_of(rename)}/")]
        target = rng.choice(own or free)
        used.add(target)
        module, word = Path(target).parts[2], Path(target).stem
        caller_module = module_of(call)
        if caller_module == module:
            caller_module = rng.choice([m for m in MODULES if m != module])
        caller = f"src/app/{caller_module}/{rng.choice(CALLER_FILES)}"
        old = function_name(module, word)
        new = f"{module}_{word}_amount"
        feature = f"{caller_module}_with_{word}_w{call.key}"
        rename.title = f"W{rename.key}: Rename {old} to {new} in {module}"
        rename.description = (
            f"Rename {old} ({target}) to {new}, and every caller of it. Done when the check passes."
        )
        call.title = f"W{call.key}: Use {module}'s {word} total in {caller_module}"
        call.description = (
            f"Add {feature} to {caller}: {module}'s {word} total, plus one; and its check. "
            "Done when the check passes."
        )
        rename.semantic = {
            "pair": number,
            "role": "rename",
            "path": target,
            "module": module_name(target),
            "old": old,
            "new": new,
        }
        call.semantic = {
            "pair": number,
            "role": "call",
            "path": caller,
            "module": module_name(target),
            "target": target,
            "feature": feature,
        }
        for member, path in ((rename, target), (call, caller)):
            member.paths, member.extra, member.alternatives = [path], [], []
            member.blocked_by, member.crash, member.crash_after = [], None, 0


def hot_spot(rng: random.Random, ranking: list[str]) -> str:
    draw = rng.random()
    for path, weight in HOT_WEIGHTS.items():
        if draw < weight:
            return path
        draw -= weight
    weights = [1 / (rank + 1) for rank in range(len(ranking))]
    return rng.choices(ranking, weights=weights)[0]


def every_ingredient(issues: list[PlanIssue]) -> None:
    """At least one crash, one dependency and one hot file edited by several issues,
    however few the issues (the later ones get them, where there are enough; semantic
    pairs' members only when the others are too few)."""
    others = [issue for issue in issues if not issue.semantic]
    if not any(issue.crash for issue in issues):
        crashing = others[min(1, len(others) - 1)] if others else issues[-1]
        crashing.crash = "exit"
    if len(issues) >= 2 and not any(issue.blocked_by for issue in issues):
        issues[-1].blocked_by = [issues[0].key]
    sharing = [i for i in issues if ROUTER in i.paths or ROUTER in i.extra]
    for issue in others + [issue for issue in issues if issue.semantic]:
        if len(sharing) >= min(3, len(issues)):
            break
        if issue not in sharing:
            issue.extra.append(ROUTER)
            issue.alternatives.append(issue.paths[0])
            sharing.append(issue)
