"""The documents hold together, and hold to the code.

- Every citation in the code resolves: each "invariant N" names a numbered invariant
  of docs/design.md, named by its title in comments and docstrings ("invariant 17
  (stalled is derived)"), and each cited section (``API.md "Fences"``, ``(DESIGN.md,
  error shape)``) is a heading of the document it names. The code may spell the documents
  ``API.md``/``DESIGN.md`` or ``docs/api.md``/``docs/design.md``; the other guides
  (``docs/operations.md``...) by their path.
- Every relative link of README.md and docs/*.md leads to a file, and its ``#anchor``
  to a heading of it (as GitHub makes anchors); every invariant they cite exists.
- The workflow the documents state is the one ``get_workflow`` serves.
- Every setting the code reads from the environment is in docs/operations.md."""

import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Every top-level package of the project (the product's, the demo's, the benches'...).
SCANNED = tuple(
    sorted(
        path.name
        for path in ROOT.iterdir()
        if (path / "__init__.py").is_file() and path.name != "tests"
    )
)
DOCS = {path.stem: path for path in sorted((ROOT / "docs").glob("*.md"))}
MARKDOWN = (ROOT / "README.md", *DOCS.values())

# Between the words of a citation: spaces, line breaks, and the "#" of a wrapped comment.
GAP = r"[\s#]*"
NUMBER_LIST = rf"\d+(?:{GAP}(?:,|-|–|—|and|or|to){GAP}\d+)*"
INVARIANTS = re.compile(rf"\binvariants?{GAP}({NUMBER_LIST})", re.IGNORECASE)
# api.md and design.md may be cited bare (as the spec spells them); the others by path.
DOC = r"(?<![\w./-])(docs/\w+|api|design)\.md\b"
QUOTED_SECTION = re.compile(rf"{DOC}(?:,{GAP}|\s+)\"([^\"\n]{{1,80}})\"", re.IGNORECASE)
# Unquoted, a section is the rest of a parenthesis: "(DESIGN.md, error shape)".
# "(design.md, invariant 13)" cites the invariant, not a section.
BARE_SECTION = re.compile(
    rf"\({GAP}{DOC},{GAP}(?!{GAP}invariants?\b)([^\"()]{{1,80}}?)\s*\)", re.IGNORECASE
)


@dataclass(frozen=True)
class Citation:
    line: int
    doc: str  # "design" for an invariant; "api" or "design" for a section
    invariant: int | None = None
    section: str | None = None

    def __str__(self) -> str:
        if self.invariant is not None:
            return f"invariant {self.invariant}"
        return f'docs/{self.doc}.md "{self.section}"'


def numbers(cited: str) -> list[int]:
    """``"4-8"`` → 4..8, ``"2, 3 and 8"`` → 2, 3, 8."""
    found: list[int] = []
    for part in re.split(rf"{GAP}(?:,|and|or){GAP}", cited):
        ends = [int(n) for n in re.findall(r"\d+", part)]
        if len(ends) == 2:
            found += range(ends[0], ends[1] + 1)
        else:
            found += ends
    return found


def tidy(section: str) -> str:
    """A section as cited across wrapped comment lines, on one line."""
    return re.sub(rf"\s*\n{GAP}", " ", section).strip()


def doc_name(cited: str) -> str:
    """``"API"``, ``"docs/api"`` → ``"api"``."""
    return cited.lower().removeprefix("docs/")


def citations(text: str) -> list[Citation]:
    def line_of(offset: int) -> int:
        return text.count("\n", 0, offset) + 1

    found = [
        Citation(line_of(match.start()), "design", invariant=number)
        for match in INVARIANTS.finditer(text)
        for number in numbers(match.group(1))
    ]
    for pattern in (QUOTED_SECTION, BARE_SECTION):
        found += [
            Citation(line_of(match.start()), doc_name(match.group(1)), section=tidy(match.group(2)))
            for match in pattern.finditer(text)
        ]
    return sorted(found, key=lambda citation: citation.line)


def key(heading: str) -> str:
    """A heading or a cited section, compared without case, markup or punctuation."""
    heading = re.sub(r"\s*\([^)]*\)\s*$", "", heading)  # "Invariants (tested)" = "Invariants"
    return " ".join(re.sub(r"[^\w\s-]", " ", heading.lower()).split())


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without markup, lower case, with
    punctuation dropped and each space a hyphen (``"Keys: the key"`` → ``keys-the-key``)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def prose_lines(markdown: str) -> Iterator[tuple[int, str]]:
    """Each line outside fenced code, numbered from 1."""
    in_code = False
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if not in_code:
            yield number, line


@dataclass(frozen=True)
class Document:
    headings: frozenset[str]
    invariants: frozenset[int]
    anchors: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, markdown: str) -> "Document":
        """Its headings (as cited, and as anchors), and the numbers of the list items
        directly under a heading called "Invariants" (a subsection, such as "Not yet
        built", does not count)."""
        headings: set[str] = set()
        invariants: set[int] = set()
        anchors: set[str] = set()
        seen: dict[str, int] = {}
        section = ""
        for _, line in prose_lines(markdown):
            if heading := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line):
                section = key(heading.group(1))
                headings.add(section)
                slug = anchor(heading.group(1))
                # A repeated heading's anchor takes a number, as on GitHub.
                anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
                seen[slug] = seen.get(slug, 0) + 1
            elif section == "invariants" and (item := re.match(r"(\d+)\.\s", line)):
                invariants.add(int(item.group(1)))
        return cls(frozenset(headings), frozenset(invariants), frozenset(anchors))


def unresolved(found: list[Citation], docs: dict[str, Document]) -> list[Citation]:
    missing = []
    for citation in found:
        doc = docs.get(citation.doc)
        if doc is None:
            missing.append(citation)
        elif citation.invariant is not None:
            if citation.invariant not in doc.invariants:
                missing.append(citation)
        elif key(citation.section or "") not in doc.headings:
            missing.append(citation)
    return missing


def scanned_files() -> Iterator[Path]:
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.relative_to(ROOT).parts:
                yield path


def code_citations() -> list[tuple[Path, Citation]]:
    return [
        (path, citation)
        for path in scanned_files()
        for citation in citations(path.read_text(encoding="utf-8"))
    ]


def the_docs() -> dict[str, Document]:
    return {name: Document.parse(path.read_text(encoding="utf-8")) for name, path in DOCS.items()}


# --- the code against the documents ------------------------------------------------


def test_every_citation_in_the_code_resolves():
    docs = the_docs()
    found = code_citations()
    missing = [
        f"{path.relative_to(ROOT)}:{citation.line}: cites {citation}, "
        f"which docs/{citation.doc}.md does not have"
        for path, citation in found
        if unresolved([citation], docs)
    ]
    assert not missing, "\n".join(missing)


def test_the_code_cites_the_documents():
    """The scan finds citations at all: a pattern that matched nothing would pass."""
    found = [citation for _, citation in code_citations()]
    assert any(citation.invariant is not None for citation in found)
    assert any(citation.section is not None for citation in found)


def test_the_design_numbers_invariants_one_to_ten():
    assert set(range(1, 11)) <= the_docs()["design"].invariants


# --- the documents among themselves ------------------------------------------------

# [text](target) and ![alt](target), with an optional "title".
LINK = re.compile(r"\[[^\]]*\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|/)", re.IGNORECASE)  # a URL, or a site path


@dataclass(frozen=True)
class Link:
    source: Path
    line: int
    target: str

    def __str__(self) -> str:
        return f"{self.source.relative_to(ROOT)}:{self.line}: ({self.target})"


def links(source: Path) -> list[Link]:
    """The relative links of a Markdown file, outside code."""
    found = []
    for number, line in prose_lines(source.read_text(encoding="utf-8")):
        for match in LINK.finditer(CODE_SPAN.sub(lambda span: "_" * len(span[0]), line)):
            if not EXTERNAL.match(match.group(1)):
                found.append(Link(source, number, match.group(1)))
    return found


def broken(link: Link) -> str | None:
    """Why ``link`` leads nowhere, or None."""
    path, _, fragment = link.target.partition("#")
    target = (link.source.parent / path).resolve() if path else link.source
    if not target.is_relative_to(ROOT) or not target.exists():
        return "no such file"
    if fragment:
        if target.suffix != ".md":
            return "an anchor in a file that is not Markdown"
        anchors = Document.parse(target.read_text(encoding="utf-8")).anchors
        if fragment not in anchors:
            return f"{target.relative_to(ROOT)} has no heading #{fragment}"
    return None


def prose(markdown: str) -> str:
    """The text outside fenced code and code spans (line numbers kept)."""
    lines = dict(prose_lines(markdown))
    return "\n".join(
        CODE_SPAN.sub("", lines.get(number, "")) for number in range(1, markdown.count("\n") + 2)
    )


def test_every_relative_link_resolves_to_a_file_and_a_heading():
    found = [link for source in MARKDOWN for link in links(source)]
    assert len(found) > 20  # the scan finds the links at all
    missing = [f"{link}: {why}" for link in found if (why := broken(link))]
    assert not missing, "\n".join(missing)


def test_the_readme_links_every_guide_and_stays_short():
    readme = ROOT / "README.md"
    linked = {(readme.parent / link.target.partition("#")[0]).resolve() for link in links(readme)}
    assert set(DOCS.values()) <= linked, "a guide in docs/ that the README does not link"
    # A five-minute read: the details are the guides'.
    text = readme.read_text(encoding="utf-8")
    assert text.count("\n") <= 160
    assert len(text.split()) <= 1200


def test_the_speed_guide_stays_a_guide():
    # The benches, what each measures, today's figures and how to run them: the rounds
    # of work and how each figure was found are docs/history/speed.md's.
    text = DOCS["speed"].read_text(encoding="utf-8")
    assert len(text.split()) <= 2000


def test_every_citation_in_the_documents_resolves():
    docs = the_docs()
    missing = [
        f"{source.relative_to(ROOT)}:{citation.line}: cites {citation}"
        for source in MARKDOWN
        for citation in citations(prose(source.read_text(encoding="utf-8")))
        if unresolved([citation], docs)
    ]
    assert not missing, "\n".join(missing)


# --- the workflow: the documents against get_workflow ---------------------------------

STATE = r"`([a-z_]+)`"
ARROW = re.compile(r"`([a-z_]+) → ([a-z_]+)`")


def section(markdown: str, heading: str) -> list[str]:
    """The prose lines under ``heading``, up to the next heading."""
    lines: list[str] = []
    inside = False
    for _, line in prose_lines(markdown):
        if re.match(r"#{1,6}\s", line):
            inside = key(line.lstrip("#")) == key(heading)
        elif inside:
            lines.append(line)
    return lines


def documented_workflow() -> dict[str, object]:
    """docs/api.md "The workflow": its table and its two rules, as get_workflow's shape."""
    lines = section(DOCS["api"].read_text(encoding="utf-8"), "The workflow")
    rows = [line for line in lines if re.match(rf"\|\s*{STATE}\s*\|", line)]
    transitions = []
    for row in rows:
        source, targets = (cell.strip() for cell in row.strip("|").split("|"))
        for target in re.split(r",\s*(?=`)", targets):
            (state,) = re.findall(STATE, target.split("(")[0])
            transitions.append(
                {"from": re.findall(STATE, source)[0], "to": state, "human_only": "(" in target}
            )
    text = " ".join(lines)
    ready = re.search(r"\*\*Definition of ready\*\*(.*?)(?:- \*\*|$)", text)
    report = re.search(r"\*\*Report\*\*: entering (.*?) needs", text)
    assert ready and report, "docs/api.md's workflow lost its definition of ready or report"
    return {
        "states": [re.findall(STATE, row)[0] for row in rows],
        "transitions": transitions,
        "definition_of_ready": re.findall(r"`(\w+)` \(", ready.group(1)),
        "report": sorted(re.findall(STATE, report.group(1))),
    }


def get_workflow() -> dict[str, Any]:
    # Imported here: the links and citations do not wait on the services importing.
    from coordination.services.workflow import get_workflow as served

    return served()


def test_the_documented_workflow_is_the_one_get_workflow_serves():
    served = get_workflow()
    assert documented_workflow() == {
        "states": served["states"],
        "transitions": served["transitions"],
        "definition_of_ready": [item["field"] for item in served["definition_of_ready"]],
        "report": served["report"]["required_for"],
    }


def test_every_move_the_documents_name_is_one_the_workflow_has():
    """A move written `a → b` is a transition (or is said to be none), and one called a
    gate is a human gate."""
    served = get_workflow()
    moves = {(t["from"], t["to"]) for t in served["transitions"]}
    gates = {(g["from"], g["to"]) for g in served["gates"]}
    states = set(served["states"])
    wrong = []
    for source in MARKDOWN:
        for number, line in prose_lines(source.read_text(encoding="utf-8")):
            for match in ARROW.finditer(line):
                move = (match.group(1), match.group(2))
                if not set(move) <= states:
                    continue
                denied = line[match.end() :].startswith(" is no transition")
                gate = "gate" in line[max(0, match.start() - 40) : match.start()]
                if (move in moves) == denied or (gate and move not in gates):
                    wrong.append(f"{source.relative_to(ROOT)}:{number}: {match.group(0)}")
    assert not wrong, "\n".join(wrong)


# --- the settings ---------------------------------------------------------------------

ENVIRONMENT_READ = re.compile(
    r"(?:os\.environ\.get|os\.getenv|env_\w+)\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']"
)


def test_every_setting_read_from_the_environment_is_documented():
    read = {
        name
        for path in (ROOT / "projektor" / "settings.py", ROOT / "gunicorn.conf.py")
        for name in ENVIRONMENT_READ.findall(path.read_text(encoding="utf-8"))
    }
    assert {"SECRET_KEY", "PROJEKTOR_SESSION_TTL_SECONDS", "PROJEKTOR_BIND"} <= read
    operations = DOCS["operations"].read_text(encoding="utf-8")
    assert not {name for name in read if f"`{name}`" not in operations}


# --- the parser, on synthetic text ------------------------------------------------------

SAMPLE = '''\
"""Claims (invariants 4-8), leases (invariants 2, 3 and 8), runs (invariant 99).

Fences (API.md, "Fences") and API.md "Rate limits"; docs/api.md, "Nowhere".
"""
# A wrapped comment: the database's clock (invariant
# 1), and the answer (DESIGN.md, error shape); (docs/design.md, No such part).
PATHS = ["docs/api.md", "docs/design.md"]  # paths in data are not citations
'''

SAMPLE_DOCS = {
    "api": Document.parse("# API\n\n## Fences\n\n## Rate limits\n"),
    "design": Document.parse(
        "# Design\n\n## Invariants\n\n"
        + "".join(f"{n}. **Rule {n}.** Text.\n" for n in range(1, 11))
        + "\n### Not yet built\n\n11. Directory claims.\n\n## Error shape\n"
    ),
}


def test_the_parser_reads_every_form_of_citation():
    found = citations(SAMPLE)
    invariants = sorted({c.invariant for c in found if c.invariant is not None})
    assert invariants == [*range(1, 9), 99]
    assert {(c.doc, c.section) for c in found if c.section is not None} == {
        ("api", "Fences"),
        ("api", "Rate limits"),
        ("api", "Nowhere"),
        ("design", "error shape"),
        ("design", "No such part"),
    }
    assert next(c for c in found if c.invariant == 1).line == 5  # where the citation starts


def test_the_parser_reports_what_the_documents_lack():
    missing = {str(citation) for citation in unresolved(citations(SAMPLE), SAMPLE_DOCS)}
    assert missing == {"invariant 99", 'docs/api.md "Nowhere"', 'docs/design.md "No such part"'}


def test_an_invariant_listed_as_not_yet_built_does_not_resolve():
    assert SAMPLE_DOCS["design"].invariants == frozenset(range(1, 11))
    assert [str(c) for c in unresolved(citations("(invariant 11)"), SAMPLE_DOCS)] == [
        "invariant 11"
    ]


def test_anchors_are_made_as_github_makes_them():
    assert anchor("Keys: the key is the actor") == "keys-the-key-is-the-actor"
    assert anchor("Backfilling `requires_filesystem`") == "backfilling-requires_filesystem"
    assert anchor("Projektor — speed") == "projektor--speed"
    assert anchor("[api.md](api.md) and more") == "apimd-and-more"
    parsed = Document.parse("# A\n\n```\n# not a heading\n```\n\n## A\n\n### B, c\n")
    assert parsed.anchors == {"a", "a-1", "b-c"}


def test_links_in_code_are_not_links():
    sample = ROOT / "README.md"
    text = "[a](x.md) `[b](y.md)`\n```\n[c](z.md)\n```\n[d](https://e.org/) [f](/g/)"
    found = [
        match.group(1)
        for _, line in prose_lines(text)
        for match in LINK.finditer(CODE_SPAN.sub(lambda span: "_" * len(span[0]), line))
        if not EXTERNAL.match(match.group(1))
    ]
    assert found == ["x.md"]
    assert broken(Link(sample, 1, "docs/nowhere.md")) == "no such file"
    assert broken(Link(sample, 1, "docs/api.md#nowhere")) == "docs/api.md has no heading #nowhere"
    assert broken(Link(sample, 1, "docs/api.md#events")) is None


# --- invariants cited by name ------------------------------------------------------

# "invariant 17 (stalled is derived)", "invariants 4 (stale reclaim) and 11 (overlap)":
# each number with a name that a reader and this test hold against its title, both
# compared in whole words, without case or punctuation. The name is the start of the
# title ("the WIP cap" for "The WIP cap is admission control, atomically"), or else
# words of it that no other title has ("all-or-nothing" for "File claims are
# all-or-nothing"); either way it names that invariant and no other, so a wrong number
# is caught ("invariant 18 (liveness)": 18 ends with "liveness", but 1 starts with it).
# A range ("invariants 4-6") names none.
#
# The product's code is read whole, its strings too (the API serves its descriptions and
# help texts), and so are its templates and documents; the other packages (the demo's,
# the benches') in their comments and docstrings.
PRODUCT = ("coordination", "heatmap", "projektor", "projektor_agent")
TEMPLATES = ROOT / "templates"
# Between the words of a citation a string may also be broken in two:
# "... invariant 4 "\n "(stale reclaim) ...".
SPLIT = r"[\s#\"']*"
CITATION_START = re.compile(rf"\binvariants?{SPLIT}(?=\d)", re.IGNORECASE)
NAMED_NUMBER = re.compile(rf"(\d+)(?!\d)(?:{SPLIT}\(([^()]*)\))?")
JOINER = re.compile(rf"{SPLIT}(?:,|and|or|(-|–|—|to)){SPLIT}(?=\d)")


def invariant_titles() -> dict[int, str]:
    design = DOCS["design"].read_text(encoding="utf-8")
    items = re.findall(r"^(\d+)\.\s+\*\*(.+?)\*\*", design, re.MULTILINE)
    return {int(number): key(title) for number, title in items}


def prose_spans(source: str) -> list[tuple[int, int]]:
    """Where the comments and docstrings of Python ``source`` are (offsets): what a
    reader reads as prose; other strings are data, such as the API's own texts."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    statement_ends = (tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.COMMENT)
    line_starts = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
    spans = []
    for index, token in enumerate(tokens):
        before = tokens[index - 1].type if index else tokenize.NEWLINE
        after = tokens[index + 1].type if index + 1 < len(tokens) else tokenize.ENDMARKER
        docstring = (
            token.type == tokenize.STRING and before in line_starts and after in statement_ends
        )
        if token.type == tokenize.COMMENT or docstring:
            (row, column), (end_row, end_column) = token.start, token.end
            spans.append((starts[row - 1] + column, starts[end_row - 1] + end_column))
    return spans


@dataclass(frozen=True)
class NamedCitation:
    line: int
    invariant: int
    name: str | None  # what the parenthesis after the number says, if there is one
    ranged: bool = False  # the number opens or closes a range ("4-6")


def named_citations(
    source: str, spans: list[tuple[int, int]] | None = None
) -> Iterator[NamedCitation]:
    """Each invariant cited in ``source``, or only in its ``spans`` (offsets) if given."""
    for start in CITATION_START.finditer(source):
        if spans is not None and not any(begin <= start.start() < end for begin, end in spans):
            continue
        position, ranged = start.end(), False
        while number := NAMED_NUMBER.match(source, position):
            joined = JOINER.match(source, number.end())
            ranged = ranged or bool(joined and joined[1])
            line = source.count("\n", 0, number.start()) + 1
            yield NamedCitation(line, int(number[1]), number[2], ranged)
            if joined is None:
                break
            position, ranged = joined.end(), bool(joined[1])


def named(name: str, titles: dict[int, str]) -> set[int]:
    """The invariants ``name`` names: those whose title starts with it, or else those
    whose title has its words in a row."""
    words = key(name)
    if not words:
        return set()
    starting = {n for n, title in titles.items() if f"{title} ".startswith(f"{words} ")}
    return starting or {n for n, title in titles.items() if f" {words} " in f" {title} "}


def misnamed(source: str, titles: dict[int, str], *, prose_only: bool = False) -> list[str]:
    """What is wrong with each citation of ``source`` (in its comments and docstrings
    only if ``prose_only``), as "line: invariant N (its name)" and why."""
    wrong = []
    for cited in named_citations(source, prose_spans(source) if prose_only else None):
        said = f"{cited.line}: invariant {cited.invariant}"
        if cited.ranged:
            wrong.append(f"{said} in a range, each invariant not named")
        elif cited.invariant not in titles:
            wrong.append(f"{said}, which docs/design.md does not have")
        elif not cited.name:
            wrong.append(f"{said} without its name")
        elif named(cited.name, titles) != {cited.invariant}:
            wrong.append(f"{said} ({cited.name})")
    return wrong


def cited_files() -> Iterator[tuple[Path, bool]]:
    """Each file whose citations must name their invariants, and whether only its
    comments and docstrings count."""
    for path in scanned_files():
        yield path, path.relative_to(ROOT).parts[0] not in PRODUCT
    for path in sorted(TEMPLATES.rglob("*")):
        if path.is_file():
            yield path, False
    for path in DOCS.values():
        yield path, False


def test_every_invariant_cited_is_named_by_its_title():
    titles = invariant_titles()
    assert titles[17].startswith("stalled is derived")
    files = list(cited_files())
    assert {path.suffix for path, _ in files} >= {".py", ".html", ".md"}
    wrong = [
        f"{path.relative_to(ROOT)}:{problem}"
        for path, prose_only in files
        for problem in misnamed(path.read_text(encoding="utf-8"), titles, prose_only=prose_only)
    ]
    assert not wrong, "a citation's name is not its number's title:\n" + "\n".join(wrong)


def test_a_citation_named_for_another_invariant_is_found():
    titles = invariant_titles()
    source = (
        "# invariants 4 (stale reclaim) and 17 (stalled is derived)\n"
        "x = 1  # invariant 15 (stalled is derived)\n"
        '"""invariant 11 (overlap), then invariant 5."""\n'
        'HELP = "invariant 3, as the API says it"\n'
        'ALSO = "invariant 2 (one live lease per issue) and 18 (liveness)"\n'
        'SPLIT = ("invariant 4 "\n    "(stale reclaim), invariant "\n    "13 (the work graph)")\n'
        "# invariants 4-6, invariant 99 (no such), invariant 20 (the WIP cap)\n"
        "# invariant 3 (the), invariant 3 (the WIP cap)\n"
    )
    assert misnamed(source, titles) == [
        "2: invariant 15 (stalled is derived)",
        "3: invariant 5 without its name",
        "4: invariant 3 without its name",
        "5: invariant 18 (liveness)",
        "8: invariant 13 (the work graph)",
        "9: invariant 4 in a range, each invariant not named",
        "9: invariant 6 in a range, each invariant not named",
        "9: invariant 99, which docs/design.md does not have",
        "9: invariant 20 (the WIP cap)",
        "10: invariant 3 (the)",
    ]
    # In the comments and docstrings only, the strings are data.
    assert misnamed(source, titles, prose_only=True) == [
        "2: invariant 15 (stalled is derived)",
        "3: invariant 5 without its name",
        "9: invariant 4 in a range, each invariant not named",
        "9: invariant 6 in a range, each invariant not named",
        "9: invariant 99, which docs/design.md does not have",
        "9: invariant 20 (the WIP cap)",
        "10: invariant 3 (the)",
    ]


def test_a_name_is_the_start_of_its_title_or_words_of_no_other():
    titles = invariant_titles()
    assert named("Liveness", titles) == {1}  # 18 ends with it, but 1 starts with it
    assert named("The WIP cap", titles) == {3}
    assert named("A runner's child never outlives its runner's right to work", titles) == {19}
    assert named("all-or-nothing", titles) == {5}
    assert named("day counts", titles) == {15}
    assert named("rows count", titles) == {14, 15}  # names no one invariant
    assert named("the", titles) == {3, 13, 16, 18, 21}
    assert named("over", titles) == set()  # whole words only
    assert named("", titles) == set()
    # Two words are enough to name any invariant: no two titles start alike.
    for number, title in titles.items():
        assert named(" ".join(title.split()[:2]), titles) == {number}
