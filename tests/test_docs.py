"""Every citation in the code resolves: each "invariant N" names a numbered invariant
of docs/design.md, and each cited section (``API.md "Fences"``, ``(DESIGN.md, error
shape)``) is a heading of docs/api.md or docs/design.md. The code may spell the
documents ``API.md``/``DESIGN.md`` or ``docs/api.md``/``docs/design.md``."""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("coordination", "heatmap", "projektor")
DOCS = {"api": ROOT / "docs" / "api.md", "design": ROOT / "docs" / "design.md"}

# Between the words of a citation: spaces, line breaks, and the "#" of a wrapped comment.
GAP = r"[\s#]*"
NUMBER_LIST = rf"\d+(?:{GAP}(?:,|-|–|—|and|or|to){GAP}\d+)*"
INVARIANTS = re.compile(rf"\binvariants?{GAP}({NUMBER_LIST})", re.IGNORECASE)
DOC = r"(?<![\w./-])(?:docs/)?(api|design)\.md\b"
QUOTED_SECTION = re.compile(rf"{DOC}(?:,{GAP}|\s+)\"([^\"\n]{{1,80}})\"", re.IGNORECASE)
# Unquoted, a section is the rest of a parenthesis: "(DESIGN.md, error shape)".
BARE_SECTION = re.compile(rf"\({GAP}{DOC},{GAP}([^\"()]{{1,80}}?)\s*\)", re.IGNORECASE)


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
            Citation(line_of(match.start()), match.group(1).lower(), section=tidy(match.group(2)))
            for match in pattern.finditer(text)
        ]
    return sorted(found, key=lambda citation: citation.line)


def key(heading: str) -> str:
    """A heading or a cited section, compared without case, markup or punctuation."""
    heading = re.sub(r"\s*\([^)]*\)\s*$", "", heading)  # "Invariants (tested)" = "Invariants"
    return " ".join(re.sub(r"[^\w\s-]", " ", heading.lower()).split())


@dataclass(frozen=True)
class Document:
    headings: frozenset[str]
    invariants: frozenset[int]

    @classmethod
    def parse(cls, markdown: str) -> "Document":
        """Its headings, and the numbers of the list items directly under a heading
        called "Invariants" (a subsection, such as "Not yet built", does not count)."""
        headings: set[str] = set()
        invariants: set[int] = set()
        section = ""
        in_code = False
        for line in markdown.splitlines():
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            if heading := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line):
                section = key(heading.group(1))
                headings.add(section)
            elif section == "invariants" and (item := re.match(r"(\d+)\.\s", line)):
                invariants.add(int(item.group(1)))
        return cls(frozenset(headings), frozenset(invariants))


def unresolved(found: list[Citation], docs: dict[str, Document]) -> list[Citation]:
    missing = []
    for citation in found:
        doc = docs[citation.doc]
        if citation.invariant is not None:
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
    assert sorted({c.invariant for c in found if c.invariant is not None}) == [
        1,
        2,
        3,
        4,
        5,
        6,
        7,
        8,
        99,
    ]
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
