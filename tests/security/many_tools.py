"""A catalog of thousands of tools (an OpenTool-style object), for retrieval under load.

Each tool gets a distinct name, a description drawn from a shared vocabulary, and words of
its own, so that building the index and ranking have real work to do; `COUNT` can be changed
with TOOLPLEX_MANY_TOOLS.
"""

from __future__ import annotations

import os
from typing import Any

COUNT = int(os.environ.get("TOOLPLEX_MANY_TOOLS", "3200"))
WORDS = [
    "file",
    "folder",
    "image",
    "audio",
    "video",
    "weather",
    "stock",
    "price",
    "invoice",
    "email",
    "calendar",
    "meeting",
    "search",
    "web",
    "page",
    "translate",
    "language",
    "summary",
    "report",
    "chart",
    "table",
    "database",
    "query",
    "user",
    "account",
    "password",
    "reset",
    "order",
    "shipping",
    "payment",
    "refund",
    "ticket",
    "issue",
    "repository",
    "commit",
    "branch",
    "deploy",
    "server",
    "log",
    "metric",
    "alert",
    "map",
    "route",
    "distance",
    "hotel",
    "flight",
    "booking",
    "recipe",
    "nutrition",
    "music",
    "playlist",
    "podcast",
    "news",
    "article",
    "science",
]


UNIQUE_PER_TOOL = 12  # made-up words only this tool has: a large vocabulary, as a big catalog's


def coined(number: int) -> str:
    """A made-up word for `number` (letters only, so the tokenizer keeps it whole)."""
    letters = []
    while True:
        number, digit = divmod(number, 26)
        letters.append("bcdfghjklmnpqrstvwxzbcdfgh"[digit] + "aeiouyaeiouyaeiouyaeiouyae"[digit])
        if number == 0:
            return "".join(letters) + "ing"


def _description(index: int) -> str:
    picked = [WORDS[(index * step + step * step) % len(WORDS)] for step in (3, 7, 11, 13, 17, 19)]
    own = [coined(index * UNIQUE_PER_TOOL + k) for k in range(UNIQUE_PER_TOOL)]
    return f"Tool number {index}: handle the {' '.join(picked)} of a request; {' '.join(own)}"


class ManyTools:
    """load() describes COUNT functions; call() answers which one ran."""

    def load(self) -> dict[str, Any]:
        return {
            "opentool": "1.1.0",
            "info": {"title": "Many", "version": "1.0.0"},
            "functions": [
                {
                    "name": f"tool_{index:05d}_{WORDS[index % len(WORDS)]}",
                    "description": _description(index),
                    "parameters": [
                        {"name": WORDS[(index + 5) % len(WORDS)], "schema": {"type": "string"}, "required": False}
                    ],
                }
                for index in range(COUNT)
            ],
        }

    def call(self, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        return {"function": name}


toolkit = ManyTools()
