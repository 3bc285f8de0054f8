"""Offline tool retrieval: rank visible tools for a question with BM25.

Each tool becomes one document: its name split into words (`WebEnv_search_and_browse`
-> web env search and browse), its toolkit, description, and each parameter's
name and description. Words are lower-cased, stop words dropped and stemmed
(Snowball) so that "files" finds "file". The index is built once per catalog;
a reload builds a new catalog and so a new index.

Building the index and ranking are CPU work (seconds for thousands of tools):
`retrieve` does both in a worker thread, so the event loop keeps serving.
"""

from __future__ import annotations

import asyncio
import re
import threading
import weakref
from collections.abc import Iterable
from typing import Any

import snowballstemmer
from rank_bm25 import BM25Plus

from gateway.catalog import Catalog
from gateway.model import Principal, ToolSpec, permitted

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[a-z0-9]+")
# Words that say nothing about which tool fits; kept short on purpose.
_STOP_TEXT = """a an the and or of to in on for with by from at as is are be been was were it its this that these those
    i me my we our you your he she they them their what which who whom how when where why can could would should
    will shall do does did done have has had please want need some any all into out up about than then so if
    not no yes just also get gets given give using use used via per each"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
NAME_WEIGHT = 2  # a tool's name words count this many times: names are the densest signal


class Tokenizer:
    """Words, split at camelCase and snake_case, stop words dropped, stemmed.

    Stems are remembered (up to MAX_STEMS words): a catalog repeats its vocabulary, and
    Snowball stemming is nearly all the cost of building an index.
    """

    MAX_STEMS = 200_000

    def __init__(self) -> None:
        self._stemmer = snowballstemmer.stemmer("english")
        self._lock = threading.Lock()  # Snowball stemmers keep state between calls
        self._stems: dict[str, str] = {}

    def __call__(self, text: str) -> list[str]:
        words = _WORD.findall(_CAMEL.sub(" ", text).lower())
        kept = [w for w in words if w not in STOP_WORDS]
        with self._lock:
            return [self._stem(word) for word in kept]

    def _stem(self, word: str) -> str:
        stem = self._stems.get(word)
        if stem is None:
            stem = self._stemmer.stemWord(word)
            if len(self._stems) < self.MAX_STEMS:
                self._stems[word] = stem
        return stem


def _parameter_text(schema: dict[str, Any]) -> Iterable[str]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return
    for name, sub in properties.items():
        yield str(name)
        if isinstance(sub, dict) and isinstance(sub.get("description"), str):
            yield sub["description"]


def document_text(spec: ToolSpec) -> tuple[str, str]:
    """(name text, body text) of one tool."""
    name = f"{spec.name} {spec.toolkit}"
    body = " ".join([spec.description, *_parameter_text(spec.input_schema)])
    return name, body


class ToolIndex:
    """BM25+ over one document per tool.

    BM25+ rather than the classic Okapi weighting: Okapi gives a word found in half of
    the documents a weight of zero, which in a small catalog (four Math tools of eight)
    makes the toolkit's own name worthless.
    """

    def __init__(self, specs: Iterable[ToolSpec], tokenizer: Tokenizer | None = None) -> None:
        self.tokenize = tokenizer or Tokenizer()
        self.specs = list(specs)
        corpus = []
        for spec in self.specs:
            name, body = document_text(spec)
            corpus.append(self.tokenize(name) * NAME_WEIGHT + self.tokenize(body))
        self._words = [frozenset(doc) for doc in corpus]
        # BM25 divides by the average document length: an empty corpus has none.
        self._bm25 = BM25Plus(corpus) if corpus else None

    def search(self, question: str, top_k: int) -> list[ToolSpec]:
        """Up to `top_k` tools sharing at least one word with the question, best first."""
        terms = self.tokenize(question)
        if self._bm25 is None or not terms or top_k <= 0:
            return []
        scores = self._bm25.get_scores(terms)
        asked = set(terms)
        matching = [i for i, words in enumerate(self._words) if words & asked]
        ranked = sorted(matching, key=lambda i: (-scores[i], self.specs[i].flat_name))
        return [self.specs[i] for i in ranked[:top_k]]


_INDEXES: weakref.WeakKeyDictionary[Catalog, ToolIndex] = weakref.WeakKeyDictionary()
_INDEX_LOCK = threading.Lock()


def index_for(catalog: Catalog) -> ToolIndex:
    """The index of a catalog's visible tools, built on first use and kept as long as the catalog."""
    with _INDEX_LOCK:
        index = _INDEXES.get(catalog)
        if index is None:
            index = ToolIndex(catalog.latest(visible_only=True))
            _INDEXES[catalog] = index
        return index


def rank(catalog: Catalog, question: str, top_k: int, principal: Principal | None = None) -> list[ToolSpec]:
    """Up to `top_k` tools for the question, among those `principal` may call (`permitted`).

    A restricted caller still gets `top_k` of its own tools: everything is ranked, then filtered.
    """
    index = index_for(catalog)
    if principal is None or principal.tools is None:
        return index.search(question, top_k)
    ranked = index.search(question, max(top_k, len(index.specs)))
    return [spec for spec in ranked if permitted(principal, spec)][:top_k]


async def retrieve(catalog: Catalog, question: str, top_k: int, principal: Principal | None = None) -> list[ToolSpec]:
    """`rank` in a worker thread: building the index and scoring never block the event loop."""
    return await asyncio.to_thread(rank, catalog, question, top_k, principal)
