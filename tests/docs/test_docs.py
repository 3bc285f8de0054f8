"""The README stays a front page and the documentation's relative links lead somewhere (issue 12).

Links are markdown inline links outside code; a link to a markdown page with a `#anchor` must
name a heading of that page, as GitHub derives anchors from headings.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.pages import DOCS, README, doc_pages, name

MAX_README_LINES = 300
LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
# Pages another change of issue 12 adds (the configuration reference generated from the settings
# models); linking to them ahead of time is allowed. Once one exists, its links are checked like any.
ANNOUNCED = {DOCS / "configuration-reference.md"}
# What README.md must show: one curl example per front, each reaching that front's call route.
FRONT_ROUTES = {
    "OpenTool": "/opentool/call",
    "OXP": "/tools/call",
    "ToolServerNode": "/execute_tool",
    "JSON-RPC": "/rpc",
}


def _prose(text: str) -> str:
    """The page without fenced blocks and code spans (what they hold is not a link)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page's headings give (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for match in HEADING.finditer(FENCE.sub("", page.read_text())):
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text()))


def broken_links(page: Path) -> list[str]:
    """The page's relative links whose file, or whose anchor in a markdown page, does not exist."""
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            if file not in ANNOUNCED:
                broken.append(f"{target}: no file {name(file)}")
            continue
        if anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with anchor #{anchor} in {name(file)}")
    return broken


def test_readme_is_a_front_page() -> None:
    lines = README.read_text().count("\n")
    assert lines < MAX_README_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_pages_are_found() -> None:
    pages = [name(page) for page in doc_pages()]
    for expected in ("docs/index.md", "docs/configuration.md", "docs/operations.md", "docs/architecture.md"):
        assert expected in pages, pages
    for protocol in ("opentool", "oxp", "toolserver", "jsonrpc"):
        assert f"docs/protocols/{protocol}.md" in pages, pages


def test_relative_links_resolve() -> None:
    problems = [f"{name(page)}: {problem}" for page in doc_pages() for problem in broken_links(page)]
    assert not problems, "\n".join(problems)


def test_link_checker_sees_a_broken_link(tmp_path: Path) -> None:
    """The check above can fail: a missing file and a missing anchor are both reported."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A `coded` heading: yes\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-coded-heading-yes) [site](https://example.com) `[code](nowhere.md)`\n"
        "[gone](missing.md) [bad anchor](other.md#nope)\n```\n[fenced](nowhere.md)\n```\n"
    )
    assert [problem.split(":")[0] for problem in broken_links(page)] == ["missing.md", "other.md#nope"]


def test_every_page_is_in_the_index() -> None:
    index = DOCS / "index.md"
    listed = {(index.parent / target.partition("#")[0]).resolve() for target in links(index)}
    missing = [name(page) for page in sorted(DOCS.rglob("*.md")) if page != index and page not in listed]
    assert not missing, f"docs/index.md does not link to: {missing}"


def test_readme_shows_one_call_per_front() -> None:
    shell = "\n".join(re.findall(r"```sh\n(.*?)```", README.read_text(), re.S))
    for front, route in FRONT_ROUTES.items():
        assert f"http://127.0.0.1:8080{route}" in shell, f"README.md has no curl example for the {front} front"
