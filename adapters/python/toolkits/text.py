"""Text: small text utilities."""

from __future__ import annotations

from typing import Annotated

from adapters.python import Toolkit, tool


@tool(name="WordCount", side_effects=False)
def word_count(text: Annotated[str, "The text whose words to count"]) -> int:
    """Count the words in a text (runs of non-whitespace characters)."""
    return len(text.split())


toolkit = Toolkit("Text", [word_count], description="Text utilities")
