"""README.md is the front door: short, the two commands near the top, a link to every guide; no link in it or docs/ is broken."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT

README = ROOT / "README.md"
GUIDES = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *GUIDES]

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+).+?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose(path: Path) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: its text lowercased, punctuation but hyphens dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)  # code spans keep their text
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown file, repeated headings numbered as GitHub does (-1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose(path):
        match = HEADING.match(line)
        if not match:
            continue
        slug = anchor(match.group(2))
        if slug in seen:
            seen[slug] += 1
            found.add(f"{slug}-{seen[slug]}")
        else:
            seen[slug] = 0
            found.add(slug)
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """The relative links of a Markdown file outside code: (line, target)."""
    return [(number, target) for number, line in prose(path)
            for target in LINK.findall(CODE_SPAN.sub("", line)) if not SCHEME.match(target)]


def test_the_anchor_rule_is_githubs():
    assert anchor("Runtime API: `import parallel`") == "runtime-api-import-parallel"
    assert anchor("Rules, and where they live") == "rules-and-where-they-live"
    assert anchor("7. Sequence parallelism — `bench/sequence_parallel.py`") == "7-sequence-parallelism--benchsequence_parallelpy"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for number, target in links(page):
        file, _, fragment = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{page.relative_to(ROOT)}:{number}: {target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{page.relative_to(ROOT)}:{number}: {target}: no heading #{fragment} in {dest.name}")
    assert not broken, "\n".join(broken)


def test_the_readme_is_at_most_250_lines():
    assert len(README.read_text().splitlines()) <= 250


def test_the_two_commands_are_in_the_readmes_first_40_lines():
    head = "\n".join(README.read_text().splitlines()[:40])
    assert "make demo" in head and "make test" in head


def test_the_readme_links_every_guide():
    linked = {(README.parent / target.partition("#")[0]).resolve() for _, target in links(README)}
    missing = [str(guide.relative_to(ROOT)) for guide in GUIDES if guide.resolve() not in linked]
    assert not missing, f"README.md links no {missing}"
