"""The plan of the issues worked on a generated repository, drawn from its seed.

M issues, each with a title, a description, its declared files (``paths``: what the
issue says it will touch), a few dependencies (``blocked_by``: earlier issues' keys),
and how its agent behaves: undeclared extra edits drawn from a skewed hot-spot
distribution (the hot files first), an alternative file for each (what the agent edits
instead when the extra one is refused), how long it works (sometimes longer than the
session TTL), and whether its first attempt crashes (``exit``: exit status 1;
``sigkill``: SIGKILL of itself) after ``crash_after`` edits. Every plan has at least
one crash, one dependency and one hot file shared by several issues, whatever its
size. Issues have a ``key`` (1…M); ``id`` is the server's id, set by whoever creates
them (``Plan.assign``) before the agents run. ``Plan.save`` writes what the scripted
agent reads (``agent.py``).

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

try:
    from demo.workbench.layout import (
        CHANGELOG,
        HOT,
        MODULES,
        NOUNS,
        ROUTER,
        SETTINGS,
        function_name,
        module_name,
    )
except ImportError:  # beside agent.py run as a script: its folder is on the path
    from layout import (  # type: ignore[no-redef]
        CHANGELOG,
        HOT,
        MODULES,
        NOUNS,
        ROUTER,
        SETTINGS,
        function_name,
        module_name,
    )

# How the undeclared edits fall: the hot files take most of them (the rest go to the
# other files, by a Zipf law over a seeded ranking).
HOT_WEIGHTS = {CHANGELOG: 0.30, ROUTER: 0.20, SETTINGS: 0.15}
SEMANTIC_EVERY = 12  # a semantic pair for each this many issues (one at least, from two)
# Where a semantic pair's call goes: one of the calling module's own source files.
CALLER_FILES = ["views.py", "models.py", "forms.py", "serializers.py"]
VERBS = ["Add", "Fix", "Refactor", "Speed up", "Document", "Validate", "Log", "Rename"]


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
