"""The documentation a newcomer reads: a short README, every page reachable from docs/index.md, no broken link or
anchor between pages, and the tables reference equal to what `eval_platform/schemas.py` gives."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README_MAX_LINES = 250
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _prose(path: Path) -> list[str]:
    """The page's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        lines.append("" if fenced else line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (not - or _), spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for line in _prose(path):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def links(path: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(_prose(path), start=1):
        for target in _LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not checked
                found.append((number, target))
    return found


def test_readme_stays_short():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_every_link_and_anchor_between_pages_resolves():
    broken = []
    for page in pages():
        for number, target in links(page):
            file_part, _, anchor = target.partition("#")
            destination = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(REPO)}:{number}: {target}"
            if not destination.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{where} (no heading with that anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_docs_page_is_reachable_from_the_index():
    index = DOCS / "index.md"
    assert index.exists()
    assert any(target.split("#")[0] == "docs/index.md" for _, target in links(REPO / "README.md"))
    reached, todo = {index.resolve()}, [index]
    while todo:
        page = todo.pop()
        for _, target in links(page):
            file_part = target.partition("#")[0]
            destination = (page.parent / file_part).resolve()
            if file_part.endswith(".md") and destination.is_relative_to(DOCS) and destination not in reached:
                reached.add(destination)
                todo.append(destination)
    unreached = sorted(str(p.relative_to(REPO)) for p in DOCS.rglob("*.md") if p.resolve() not in reached)
    assert not unreached, f"pages no link from docs/index.md reaches: {unreached}"


def test_the_tables_reference_is_generated_from_schemas():
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "docs_reference.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_link_checker_catches_a_broken_anchor(tmp_path):
    page = tmp_path / "a.md"
    page.write_text(
        "# Title\n\n## The `judge_scores` table (columns)\n\n[x](a.md#no-such)\n[y](#the-judge_scores-table-columns)\n"
    )
    assert anchors(page) == {"title", "the-judge_scores-table-columns"}
    assert [t for _, t in links(page)] == ["a.md#no-such", "#the-judge_scores-table-columns"]
