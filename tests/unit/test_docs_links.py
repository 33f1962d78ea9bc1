"""The project's documents hold together: links resolve, cited anchors exist.

* Every relative link (``[text](target)``, ``[ref]: target``) in docs/*.md, README.md and CONTRIBUTING.md
  names a file or directory of the repository, and a ``#anchor`` on a Markdown target (or on the same
  document) names one of its headings.
* Every ``docs/<page>.md#<anchor>`` (and ``README.md#``, ``CONTRIBUTING.md#``, ``BENCHMARKS.md#`` of the
  repository root) cited anywhere in sdk_ext/, lambda/, rules/, infra/, tests/ and examples/ (code
  comments, docstrings, READMEs) names an existing heading of that page, so a comment such as
  "see docs/RULES.md#vanishinggradient" keeps pointing somewhere when headings change.
* Every built-in rule has its own heading in docs/RULES.md (its SageMaker name).

Anchors are GitHub's: the heading's text (inline code, links and emphasis rendered as text), lowercased,
every character that is not a letter, digit, underscore, hyphen or space dropped, spaces turned into
hyphens; a repeated heading gets ``-1``, ``-2``... Links and headings inside fenced code blocks and inline
code spans do not count.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
CITING = ("sdk_ext", "lambda", "rules", "infra", "tests", "examples")
SKIP_DIRS = {"__pycache__", "node_modules", "cdk.out", ".hypothesis", ".pytest_cache", ".mypy_cache",
             ".ruff_cache", ".git"}
TEXT_SUFFIXES = {".py", ".pyi", ".md", ".txt", ".rst", ".json", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".sh",
                 ".proto", ".ts", ".js", ".html", ".ipynb"}
TEXT_NAMES = {"Dockerfile", "Makefile"}

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_HTML_ANCHOR = re.compile(r"""<a\s[^>]*?(?:name|id)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_REF_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
_LINK_TEXT = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)]*\)")
_HTML_TAG = re.compile(r"<[^>]+>")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# a citation of a page of docs/ (or of a top-level document) with an anchor, in any text of the repository
_CITATION = re.compile(
    r"(?<![\w-])(docs/[A-Za-z0-9_.-]+\.md|(?<![/.])(?:README|CONTRIBUTING|BENCHMARKS)\.md)#([A-Za-z0-9_-]+)"
)


def outside_code(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of the lines outside fenced code blocks, inline code spans blanked."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        yield number, _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's Markdown text (before de-duplication)."""
    text = _LINK_TEXT.sub(r"\1", heading)
    text = _HTML_TAG.sub("", text)
    text = _CODE_SPAN.sub(r"\2", text)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a document offers: its headings' (de-duplicated as GitHub does) and HTML ones."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fence: str | None = None
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        found.update(_HTML_ANCHOR.findall(line))
        heading = _HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, target)`` of every link and reference definition outside code."""
    for number, line in outside_code(text):
        for match in _INLINE_LINK.finditer(line):
            yield number, match.group(1)
        definition = _REF_DEFINITION.match(line)
        if definition:
            yield number, definition.group(1)


def broken_links(document: Path, root: Path) -> list[str]:
    """What is wrong with the relative links of ``document`` (empty when every one resolves)."""
    text = document.read_text(encoding="utf-8")
    problems = []
    for number, target in links(text):
        if not target or _SCHEME.match(target) or target.startswith("//"):
            continue  # a URL (https:, mailto:) or an empty target
        path_part, _, anchor = target.partition("#")
        where = f"{document.relative_to(root)}:{number}: link {target!r}"
        if path_part:
            resolved = (document.parent / unquote(path_part)).resolve()
            if not resolved.is_relative_to(root.resolve()):
                problems.append(f"{where} points outside the repository")
                continue
            if not resolved.exists():
                problems.append(f"{where}: {path_part} does not exist")
                continue
        else:
            resolved = document
        if anchor and resolved.suffix == ".md" and resolved.is_file():
            if anchor not in anchors(resolved.read_text(encoding="utf-8")):
                problems.append(f"{where}: {resolved.relative_to(root.resolve())} has no heading with anchor #{anchor}")
    return problems


def citing_files(root: Path) -> Iterator[Path]:
    for top in CITING:
        base = root / top
        if not base.is_dir():
            continue
        for path in base.rglob("*"):
            if any(part in SKIP_DIRS or part.startswith(".venv") for part in path.relative_to(root).parts):
                continue
            if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES):
                yield path


def broken_citations(root: Path, files: list[Path]) -> list[str]:
    """Citations ``docs/<page>.md#<anchor>`` in ``files`` whose page or heading does not exist."""
    pages: dict[str, set[str] | None] = {}
    problems = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for match in _CITATION.finditer(line):
                page, anchor = match.groups()
                if page not in pages:
                    doc = root / page
                    pages[page] = anchors(doc.read_text(encoding="utf-8")) if doc.is_file() else None
                known = pages[page]
                where = f"{path.relative_to(root)}:{number}: {page}#{anchor}"
                if known is None:
                    problems.append(f"{where}: {page} does not exist")
                elif anchor not in known:
                    problems.append(f"{where}: no heading of {page} has that anchor")
    return problems


# --- the repository's documents ---------------------------------------------------------------------


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_of_the_documents_resolves(document: Path) -> None:
    assert document.is_file(), f"{document.relative_to(ROOT)} is missing"
    assert broken_links(document, ROOT) == []


def test_every_cited_docs_anchor_names_a_heading() -> None:
    files = list(citing_files(ROOT))
    assert any(p.name == "test_docs_links.py" for p in files), "the scan missed tests/"
    assert broken_citations(ROOT, files) == []


def test_every_builtin_rule_has_its_heading_in_rules_md() -> None:
    from sdk_ext.rules.builtin import BUILTIN_RULES

    known = anchors((ROOT / "docs" / "RULES.md").read_text(encoding="utf-8"))
    missing = sorted(name for name in BUILTIN_RULES if slug(name) not in known)
    assert missing == [], f"docs/RULES.md has no section '### <name>' for {missing}"


def test_format_md_keeps_the_integrity_section_for_the_checksums() -> None:
    text = (ROOT / "docs" / "FORMAT.md").read_text(encoding="utf-8")
    assert "integrity-checksums-sdk_ext-adds" in anchors(text)


# --- the checker itself ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Integrity: checksums sdk_ext adds", "integrity-checksums-sdk_ext-adds"),
        ("Records (`sdk_ext/format/profiler_records.py`)", "records-sdk_extformatprofiler_recordspy"),
        ("status.json and exit codes", "statusjson-and-exit-codes"),
        ("The whole loop on one machine: `sdk-ext` and `sdk_ext.local`",
         "the-whole-loop-on-one-machine-sdk-ext-and-sdk_extlocal"),
        ("sdk_ext — SageMaker Debugger, rebuilt", "sdk_ext--sagemaker-debugger-rebuilt"),
        ("See [the format](FORMAT.md) *now*", "see-the-format-now"),
        ("VanishingGradient", "vanishinggradient"),
    ],
)
def test_slug_is_githubs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_anchors_skip_code_and_number_repeated_headings() -> None:
    text = "# Title\n## Values\n```\n## Not a heading\n```\n### Values\n<a name=\"raw-anchor\"></a>\n"
    assert anchors(text) == {"title", "values", "values-1", "raw-anchor"}


def test_checker_reports_missing_files_and_anchors(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "A.md").write_text("# A\n## Kept heading\n", encoding="utf-8")
    doc = tmp_path / "docs" / "B.md"
    docs = "docs"  # (spelled apart so that the repository scan does not take these for citations)
    doc.write_text(
        f"# B\n[ok](A.md#kept-heading) [self](#b) [web](https://example.com/x) [dir](../{docs}/)\n"
        "[gone](Missing.md) [bad anchor](A.md#nope) `[in code](Nowhere.md)`\n"
        f"```\n[in a fence](Nowhere.md)\n```\n[ref]: ../{docs}/A.md#also-nope\n[out](../../outside.md)\n",
        encoding="utf-8",
    )
    problems = broken_links(doc, tmp_path)
    assert len(problems) == 4, problems
    assert "Missing.md does not exist" in problems[0]
    assert "#nope" in problems[1] and "#also-nope" in problems[2]
    assert "outside the repository" in problems[3]


def test_checker_reports_citations_of_missing_pages_and_headings(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "RULES.md").write_text("# Rules\n### VanishingGradient\n", encoding="utf-8")
    code = tmp_path / "rule.py"
    (tmp_path / "README.md").write_text("# Project\n## Reading a trial\n", encoding="utf-8")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "README.md").write_text("# Evaluator\n", encoding="utf-8")
    code = tmp_path / "rule.py"
    # (spelled apart: never followed by '#' in this file, so the repository scan does not check them)
    rules, nope, readme, nested = "docs/RULES.md", "docs/NOPE.md", "README.md", "rules/README.md"
    code.write_text(
        f'"""See {rules}#vanishinggradient and {rules}#no-such-rule."""\n# {nope}#x\n'
        f"# {readme}#reading-a-trial {readme}#gone {nested}#evaluator (not the root README)\n",
        encoding="utf-8",
    )
    problems = broken_citations(tmp_path, [code])
    assert problems == [
        f"rule.py:1: {rules}#no-such-rule: no heading of {rules} has that anchor",
        f"rule.py:2: {nope}#x: {nope} does not exist",
        f"rule.py:3: {readme}#gone: no heading of {readme} has that anchor",
    ]


# Documents a clone does not have: the team's design notes and references outside the repository, and the
# issue tracker. Code and docs cite docs/ (or say it in place) instead.
OUTSIDE_CITATION = re.compile(
    r"reference/[A-Z_]+\.md|\b(?:FORMAT|RULES|EVALUATOR|INFRA|SDK|AUTOSTOP|FRAMEWORKS|PROFILING|DISTRIBUTED|USER_NEEDS|"
    r"PEERS)\.md §|(?<![\w/])(?:DESIGN|STYLE)\.md|\bissue \d+(?:\.\d+)?\b|\[R\]"
)
CITING_TREES = ("sdk_ext", "lambda", "rules", "infra", "tests", "examples", "docs")
CITING_FILES = ("README.md", "CONTRIBUTING.md")


def test_nothing_cites_a_document_outside_the_repository() -> None:
    paths = [ROOT / f for f in CITING_FILES]
    for tree in CITING_TREES:
        paths += [p for p in (ROOT / tree).rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".proto", ".txt")
                  and "fixtures" not in p.relative_to(ROOT).parts[:2]]
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if path.name == "test_docs_links.py":
                continue
            for match in OUTSIDE_CITATION.finditer(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)}")
    assert not found, "cite docs/ (or say it in place), not documents outside the repository:\n" + "\n".join(found)
