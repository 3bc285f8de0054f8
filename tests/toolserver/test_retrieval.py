"""Offline retrieval: recall@3 on 52 realistic tools, asked about in two styles of question.

`retrieval_plans.json` is what XAgent sends (`summarize_plan`: a subtask with its goal and
milestones); `retrieval_questions.json` is a person's one-line chat request. Neither copies
the descriptions: `test_questions_do_not_copy_descriptions` checks that no three-word run of
a tool's own text appears in a question about it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gateway.catalog import Catalog
from gateway.model import ToolSpec
from gateway.retrieval import Tokenizer, ToolIndex, index_for

DATA = Path(__file__).with_name("data")
TOOLS: list[dict[str, Any]] = json.loads((DATA / "retrieval_tools.json").read_text())
SETS = {name: json.loads((DATA / f"retrieval_{name}.json").read_text()) for name in ("plans", "questions")}
# The plan-style set is the traffic /retrieving_tools gets from XAgent: it must reach the bar.
# One-line chat questions share fewer words with descriptions; BM25 is weaker there, and
# the floor only guards against regressions.
REQUIRED_RECALL = {"plans": 0.85, "questions": 0.6}


def spec_of(tool: dict[str, Any]) -> ToolSpec:
    properties = {name: {"type": "string", "description": text} for name, text in tool["parameters"].items()}
    return ToolSpec(
        toolkit=tool["toolkit"],
        name=tool["name"],
        version="1.0.0",
        description=tool["description"],
        input_schema={"type": "object", "properties": properties, "required": list(properties)},
    )


SPECS = [spec_of(t) for t in TOOLS]


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def test_fixture_is_big_enough_and_consistent() -> None:
    names = {s.flat_name for s in SPECS}
    assert len(names) == len(SPECS) >= 40
    for questions in SETS.values():
        assert len(questions) >= 40
        assert {q["expected"] for q in questions} <= names


@pytest.mark.parametrize("name", sorted(SETS))
def test_questions_do_not_copy_descriptions(name: str) -> None:
    by_name = {s.flat_name: t for s, t in zip(SPECS, TOOLS, strict=True)}
    for q in SETS[name]:
        tool = by_name[q["expected"]]
        own = _words(" ".join([tool["description"], *tool["parameters"].values()]))
        asked = f" {' '.join(_words(q['question']))} "
        copied = [own[i : i + 3] for i in range(len(own) - 2) if f" {' '.join(own[i : i + 3])} " in asked]
        assert not copied, (q["question"], copied)


@pytest.mark.parametrize("name", sorted(SETS))
def test_recall_at_3(name: str) -> None:
    index = ToolIndex(SPECS)
    questions = SETS[name]
    misses = []
    for q in questions:
        found = [s.flat_name for s in index.search(q["question"], 3)]
        if q["expected"] not in found:
            misses.append((q["question"], q["expected"], found))
    recall = 1 - len(misses) / len(questions)
    print(f"\nrecall@3 ({name}, {len(questions)} questions, {len(SPECS)} tools): {recall:.3f}")
    for miss in misses:
        print("  miss:", *miss)
    assert recall >= REQUIRED_RECALL[name]


def test_tokenizer_splits_names_and_stems() -> None:
    tokenize = Tokenizer()
    assert tokenize("WebEnv_search_and_browse") == ["web", "env", "search", "brows"]
    assert tokenize("CurrentConditions of the HTTPServer") == ["current", "condit", "http", "server"]
    assert tokenize("Files") == tokenize("file")


def test_search_edges() -> None:
    index = ToolIndex(SPECS)
    assert index.search("the and of", 3) == []  # nothing but stop words
    assert index.search("xylophone", 3) == []  # shares no word with any tool
    assert index.search("weather", 0) == []
    assert len(index.search("file", 100)) <= len(SPECS)
    assert ToolIndex([]).search("weather", 3) == []


def test_small_catalogs_still_rank_by_toolkit_name() -> None:
    # Half the documents contain "math": classic Okapi weights it zero; BM25+ does not.
    kit = [spec_of({"toolkit": "Math", "name": n, "description": "numbers", "parameters": {}}) for n in "ABCD"]
    other = [spec_of({"toolkit": "Text", "name": n, "description": "words", "parameters": {}}) for n in "ABCD"]
    found = ToolIndex(kit + other).search("math", 4)
    assert {s.toolkit for s in found} == {"Math"} and len(found) == 4


def test_index_is_built_once_per_catalog_of_visible_tools() -> None:
    hidden = ToolSpec(
        toolkit="Secret", name="Weather", version="1.0.0", description="weather", input_schema={}, visible=False
    )
    catalog = Catalog([*SPECS, hidden])
    first = index_for(catalog)
    assert index_for(catalog) is first
    assert "Secret_Weather" not in {s.flat_name for s in first.specs}
    assert index_for(Catalog(SPECS)) is not first
