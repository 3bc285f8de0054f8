"""The inverted retrieval index scores exactly as rank_bm25's BM25+ does, and ranks as the full scan did.

`ToolIndex` used to hand every document to `rank_bm25.BM25Plus` and score all of them per
question (28 ms at 10,000 tools). It now keeps, per word, the documents holding it and
the word's weight in each. These tests hold it to the reference: the same scores to the
last bit, the same candidates (the documents sharing a word with the question) and the
same order (score, then flat name), for a generated catalog and the benchmark's questions.
"""

from __future__ import annotations

from functools import cache

import pytest
from rank_bm25 import BM25Plus

from adapters.python.decorator import tool_of
from bench import catalog_scale, catalog_tools
from gateway.catalog import Catalog
from gateway.model import Principal, ToolSpec, permitted
from gateway.retrieval import NAME_WEIGHT, ToolIndex, document_text, rank

TOOLS = 600
EDGE_QUESTIONS = [
    "invoice invoice invoice",  # a word asked three times counts three times
    "xylophone invoice",  # a word no tool has adds nothing
    "xylophone",  # shares no word with any tool
    "the of and",  # only stop words
    "Billing",  # a toolkit's name
    "records",  # in about half the documents
]


@cache
def specs() -> list[ToolSpec]:
    out = []
    for blueprint in catalog_tools.blueprints(TOOLS):
        declared = tool_of(catalog_tools.build(blueprint))
        assert declared is not None
        out.append(
            ToolSpec(
                toolkit=blueprint.toolkit,
                name=declared.name,
                version="1.0.0",
                description=declared.description,
                input_schema=declared.schemas.input_schema,
            )
        )
    return out


@cache
def index() -> ToolIndex:
    return ToolIndex(Catalog(specs()).latest())


@cache
def reference() -> tuple[BM25Plus, list[list[str]]]:
    """rank_bm25 over the very documents the index is built from."""
    ours = index()
    corpus = []
    for spec in ours.specs:
        name, body = document_text(spec)
        corpus.append(ours.tokenize(name) * NAME_WEIGHT + ours.tokenize(body))
    return BM25Plus(corpus), corpus


QUESTIONS = catalog_scale.questions(60) + EDGE_QUESTIONS


def full_scan(question: str) -> list[ToolSpec]:
    """How search ranked before: score every document, keep those sharing a word, sort by (-score, flat name)."""
    bm25, corpus = reference()
    ours = index()
    terms = ours.tokenize(question)
    if not terms:
        return []
    scores = bm25.get_scores(terms)
    asked = set(terms)
    matching = [i for i, words in enumerate(corpus) if set(words) & asked]
    return [ours.specs[i] for i in sorted(matching, key=lambda i: (-scores[i], ours.specs[i].flat_name))]


@pytest.mark.parametrize("question", QUESTIONS)
def test_scores_are_rank_bm25s_to_the_last_bit(question: str) -> None:
    bm25, corpus = reference()
    terms = index().tokenize(question)
    expected = bm25.get_scores(terms) if terms else []
    asked = set(terms)
    sharing = {i for i, words in enumerate(corpus) if set(words) & asked}
    scores = index().scores(terms)
    assert set(scores) == sharing
    assert all(scores[i] == expected[i] for i in sharing)  # equal, not close


@pytest.mark.parametrize("question", QUESTIONS)
@pytest.mark.parametrize("top_k", [1, 5, 50, TOOLS])
def test_search_ranks_as_the_full_scan_did(question: str, top_k: int) -> None:
    assert index().search(question, top_k) == full_scan(question)[:top_k]


@pytest.mark.parametrize("question", QUESTIONS[:20])
def test_a_restricted_caller_gets_the_best_of_its_own_tools(question: str) -> None:
    catalog = Catalog(specs())
    principal = Principal(name="billing", tools=("Billing_*", "*Invoice*"))
    allowed = [s for s in full_scan(question) if permitted(principal, s)]
    assert rank(catalog, question, 5, principal) == allowed[:5]
    assert all(s.toolkit == "Billing" or "Invoice" in s.name for s in allowed)
    assert rank(catalog, question, 5, Principal(name="none", tools=())) == []


def test_ties_go_to_the_smaller_flat_name_whatever_the_order_of_the_tools() -> None:
    # The same words, so the same score: only the flat name decides.
    twins = [
        ToolSpec(toolkit="Beta", name="Alpha", version="1.0.0", description="same words", input_schema={}),
        ToolSpec(toolkit="Alpha", name="Beta", version="1.0.0", description="same words", input_schema={}),
    ]
    for order in (twins, twins[::-1]):
        assert [s.flat_name for s in ToolIndex(order).search("alpha", 2)] == ["Alpha_Beta", "Beta_Alpha"]
