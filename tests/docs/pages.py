"""The documentation pages the doc tests read: the README first, then every docs/**/*.md in path order.

The README was split into docs/ (issue 12); the tests that run its examples read every page, so a
block keeps being checked wherever it moves. Order matters to them: examples run page by page, in order.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def doc_pages() -> list[Path]:
    """README.md, then docs/**/*.md sorted by path."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def name(page: Path) -> str:
    """How a page is named in messages: its path from the repository root (else as given)."""
    return page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else str(page)
