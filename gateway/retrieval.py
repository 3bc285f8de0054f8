"""Offline tool retrieval: rank visible tools for a question with BM25.

Each tool becomes one document: its name split into words (`WebEnv_search_and_browse`
-> web env search and browse), its toolkit, description, and each parameter's
name and description. Words are lower-cased, stop words dropped and stemmed
(Snowball) so that "files" finds "file". The index is built once per catalog;
a reload builds a new catalog and so a new index.

The index is inverted (word -> the tools that hold it, with the word's BM25+ weight
in each, worked out when the index is built), so a question costs one lookup and
one vector operation per word: at 10,000 tools, rank_bm25 counting each query
word in every tool's text cost 28 ms per question; this costs a fraction of one.
The scores are BM25+'s as rank_bm25 computes them, to the last bit
(tests/core/test_retrieval_index.py compares both).

Building the index and ranking are CPU work (building takes about a second at
10,000 tools): `retrieve` does both in a worker thread, so the event loop keeps serving.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

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
# BM25+'s parameters, rank_bm25's defaults.
K1 = 1.5
B = 0.75
DELTA = 1


class Tokenizer:
    """Words, split at camelCase and snake_case, stop words dropped, stemmed.

    Stems are remembered (up to MAX_STEMS words): a catalog repeats its vocabulary, and
    Snowball stemming is nearly all the cost of building an index.
    """

    MAX_STEMS = 200_000

    def __init__(self) -> None:
        # Imported here: the package loads the stemmers of every language it has, a cost paid when the first
        # index is built (the first retrieval), not by every gateway start.
        import snowballstemmer

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
    """BM25+ over one document per tool, as an inverted index.

    BM25+ rather than the classic Okapi weighting: Okapi gives a word found in half of
    the documents a weight of zero, which in a small catalog (four Math tools of eight)
    makes the toolkit's own name worthless.

    A document's score is a sum over the question's words, in their order, of the word's
    weight in that document, or of its `absent` weight (idf x delta: BM25+ scores a
    missing word too) when the document lacks it; words the catalog never uses add 0.
    Summed in that order from the same per-word terms, the floating-point result is the
    one rank_bm25's `BM25Plus.get_scores` gives. Per word, the sum is one numpy vector
    operation over all documents (a fraction of a millisecond at 10,000 tools, where a
    Python loop over the candidates took up to 6 ms for a question holding "record").
    """

    def __init__(self, specs: Iterable[ToolSpec], tokenizer: Tokenizer | None = None) -> None:
        import numpy  # here, not at start-up: only a gateway asked to retrieve needs it

        self._np = numpy
        self.tokenize = tokenizer or Tokenizer()
        self.specs = list(specs)
        # Ties go to the smaller flat name, whatever order the specs came in.
        order = sorted(range(len(self.specs)), key=lambda i: self.specs[i].flat_name)
        self._tiebreak = numpy.empty(len(self.specs), dtype=numpy.intp)
        self._tiebreak[order] = numpy.arange(len(self.specs), dtype=numpy.intp)
        frequencies: list[Counter[str]] = []
        lengths: list[int] = []
        for spec in self.specs:
            name, body = document_text(spec)
            words = self.tokenize(name) * NAME_WEIGHT + self.tokenize(body)
            lengths.append(len(words))
            frequencies.append(Counter(words))
        # word -> (the documents holding it, its weight in each, its weight in a document without it)
        self._postings: dict[str, tuple[Any, Any, float]] = {}
        if frequencies:
            self._weigh(frequencies, lengths)

    def _weigh(self, frequencies: list[Counter[str]], lengths: list[int]) -> None:
        """Each word's BM25+ weight in each document holding it: rank_bm25's operations, in its order, per word
        on a vector (numpy's float64 operations round as Python's do, so the weights are the same)."""
        np = self._np
        size = len(frequencies)
        average = sum(lengths) / size
        norms = K1 * (1 - B + B * np.array(lengths, dtype=np.int64) / average)
        documents_of: dict[str, list[int]] = {}
        counts_of: dict[str, list[int]] = {}
        for document, counts in enumerate(frequencies):
            for word, count in counts.items():
                if word in documents_of:
                    documents_of[word].append(document)
                    counts_of[word].append(count)
                else:
                    documents_of[word] = [document]
                    counts_of[word] = [count]
        for word, holding in documents_of.items():
            idf = math.log((size + 1) / len(holding))
            documents = np.array(holding, dtype=np.intp)
            tf = np.array(counts_of[word], dtype=np.int64)
            weights = idf * (DELTA + (tf * (K1 + 1)) / (norms[documents] + tf))
            self._postings[word] = (documents, weights, idf * DELTA)  # the last: the same with tf = 0

    def _scored(self, terms: list[str]) -> tuple[Any, Any]:
        """(the documents sharing a word with `terms`, their scores), as numpy arrays."""
        np = self._np
        known = [self._postings[t] for t in terms if t in self._postings]
        totals = np.zeros(len(self.specs))
        shares = np.zeros(len(self.specs), dtype=bool)
        for documents, weights, absent in known:  # word by word, in the question's order, as rank_bm25 sums
            term = np.full(len(self.specs), absent)
            term[documents] = weights
            totals += term
            shares[documents] = True
        candidates = np.flatnonzero(shares)
        return candidates, totals[candidates]

    def scores(self, terms: list[str]) -> dict[int, float]:
        """BM25+ scores of the documents sharing at least one of `terms` (the others are not candidates)."""
        documents, totals = self._scored(terms)
        return dict(zip(documents.tolist(), totals.tolist(), strict=True))

    def _best_first(self, documents: Any, totals: Any, top_k: int | None) -> list[int]:
        """Documents by score, best first, ties to the smaller flat name; only the first `top_k` when given."""
        np = self._np
        if top_k is not None and len(documents) > top_k:
            # Everything scoring at least the k-th best (ties included), then only those sorted.
            kth = np.partition(-totals, top_k - 1)[top_k - 1]
            kept = -totals <= kth
            documents, totals = documents[kept], totals[kept]
        order = np.lexsort((self._tiebreak[documents], -totals))
        ranked: list[int] = documents[order].tolist()
        return ranked if top_k is None else ranked[:top_k]

    def search(self, question: str, top_k: int, allowed: Callable[[ToolSpec], bool] | None = None) -> list[ToolSpec]:
        """Up to `top_k` tools sharing at least one word with the question (and `allowed`), best first."""
        terms = self.tokenize(question)
        if not self._postings or not terms or top_k <= 0:
            return []
        documents, totals = self._scored(terms)
        if allowed is None:
            return [self.specs[i] for i in self._best_first(documents, totals, top_k)]
        found: list[ToolSpec] = []
        for i in self._best_first(documents, totals, None):
            if allowed(self.specs[i]):
                found.append(self.specs[i])
                if len(found) == top_k:
                    break
        return found


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
    return index.search(question, top_k, lambda spec: permitted(principal, spec))


async def retrieve(catalog: Catalog, question: str, top_k: int, principal: Principal | None = None) -> list[ToolSpec]:
    """`rank` in a worker thread: building the index and scoring never block the event loop."""
    return await asyncio.to_thread(rank, catalog, question, top_k, principal)
