"""The README is a front page and docs/ the manual: every relative link and `#anchor` in README.md and
docs/**/*.md reaches a file of the checkout (and a heading of it, by GitHub's anchor rules), the
README stays within 200 lines, and docs/README.md lists every docs file.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

README_MAX_LINES = 200
DOCS = PROJECT_ROOT / "docs"
PAGES = [PROJECT_ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The numbered lines of a Markdown text outside fenced code blocks."""
    lines, fenced = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        fence = FENCE.match(line)
        if fence and (fenced is None or fence.group(1) == fenced):
            fenced = fence.group(1) if fenced is None else None
        elif fenced is None:
            lines.append((number, line))
    return lines


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its rendered text (link and code markup dropped) in lower
    case, every character but letters, digits, `_`, `-` and spaces removed, spaces made hyphens.
    """
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = INLINE_CODE.sub(lambda m: m.group(2), text)
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown text; a repeated one gets -1, -2, ... as on GitHub."""
    seen: Counter[str] = Counter()
    found = set()
    for _, line in prose_lines(text):
        if heading := HEADING.match(line):
            slug = github_slug(heading.group(2))
            found.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
            seen[slug] += 1
    return found


def links(text: str) -> list[tuple[int, str]]:
    """The link targets of a Markdown text's prose (not in code), with their line numbers."""
    found = []
    for number, line in prose_lines(text):
        # a code span that shows a link is text, not a link; `[`name`](path)` stays a link
        line = INLINE_CODE.sub(lambda m: "" if "](" in m.group(2) else m.group(0), line)
        found += [(number, m.group(1)) for m in LINK.finditer(line)]
    return found


def broken_links(page: Path, root: Path) -> list[str]:
    """Each relative link of `page` whose file is not in `root`, or whose anchor is no heading there."""
    problems = []
    for number, target in links(page.read_text(encoding="utf-8")):
        if SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        where = f"{page.relative_to(root)}:{number}: {target}"
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(root.resolve()):
            problems.append(f"{where}: outside the checkout")
        elif not resolved.exists():
            problems.append(f"{where}: no such file")
        elif anchor and resolved.suffix != ".md":
            problems.append(f"{where}: an anchor into a file that is not Markdown")
        elif anchor and anchor not in anchors(resolved.read_text(encoding="utf-8")):
            problems.append(f"{where}: no heading with anchor #{anchor}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    assert broken_links(page, PROJECT_ROOT) == []


def test_the_readme_is_a_front_page_of_at_most_200_lines():
    lines = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move manual text to docs/"


def test_the_docs_index_lists_every_docs_file():
    index = DOCS / "README.md"
    listed = {
        (index.parent / target.partition("#")[0]).resolve()
        for _, target in links(index.read_text(encoding="utf-8"))
        if not SCHEME.match(target)
    }
    files = [p for p in DOCS.rglob("*.md") if p != index]
    missing = [str(p.relative_to(DOCS)) for p in files if p.resolve() not in listed]
    assert missing == [], "docs/README.md does not list these docs files"


def test_the_checker_finds_a_missing_file_a_missing_anchor_and_ignores_code(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## Your own corpus: init → check\n\n## `llm`\n")
    page = tmp_path / "README.md"
    page.write_text(
        "# Front\n\n## Two commands\n\n"
        "[ok](docs/guide.md#your-own-corpus-init--check) [ok](docs/guide.md#llm) [ok](#two-commands)\n"
        "[ok](https://example.org/x.md#nowhere) `[code](missing.md)`\n"
        "[gone](docs/missing.md) [bad anchor](docs/guide.md#data-sets) [bad](#front-page)\n"
        "```\n[fenced](missing.md)\n```\n"
    )
    assert broken_links(page, tmp_path) == [
        "README.md:7: docs/missing.md: no such file",
        "README.md:7: docs/guide.md#data-sets: no heading with anchor #data-sets",
        "README.md:7: #front-page: no heading with anchor #front-page",
    ]


def test_github_anchors_of_headings():
    assert github_slug("The verdict (notebook 10)") == "the-verdict-notebook-10"
    assert github_slug("The seeds' own stores: PostgreSQL, a Cypher graph database") == (
        "the-seeds-own-stores-postgresql-a-cypher-graph-database"
    )
    assert github_slug("[`01_build_index`](../notebooks/01_build_index.ipynb)") == "01_build_index"
    assert github_slug("Cypher graph stores: Kùzu, FalkorDB") == "cypher-graph-stores-kùzu-falkordb"
    assert anchors("## Usage\n\n## Usage\n```\n# not a heading\n```\n") == {"usage", "usage-1"}
