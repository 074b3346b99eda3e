"""BM25 keyword indexes with bm25s: sparse, vectorized, tens of times faster than rank-bm25.

``bm25s.tokenize`` and ``BM25.index`` want the whole corpus at once, as Python lists of token
lists: at a million sentences those lists, not the index, fill the memory. ``KeywordIndex.build``
instead tokenizes one batch of texts at a time, exactly as ``bm25s.tokenize`` does, and keeps
only compact arrays (term id and count of each distinct term of each text, 8 bytes); the
scores, the idf and the sparse matrix are then computed with bm25s's own scoring functions.
The result equals ``bm25s.BM25.index`` on the same texts: same vocabulary, same scores
(``tests/corpus/test_bm25.py``), up to the numbering of the terms.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

# Private helpers of bm25s, used so that the scores are computed by bm25s's own formulas; the
# equality test against ``bm25s.BM25.index`` guards them across bm25s versions.
from bm25s.scoring import (
    _build_idf_array,
    _build_nonoccurrence_array,
    _select_idf_scorer,
    _select_tfc_scorer,
)
from bm25s.tokenization import _infer_stopwords

from grasp.types import check_choice

BM25_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
"""The scoring variants of bm25s (``bm25s.scoring._select_tfc_scorer``)."""

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
"""bm25s.tokenize's default token pattern (the one of scikit-learn's CountVectorizer)."""


@dataclass
class BM25Config:
    """BM25 scoring and tokenization."""

    k1: float = 1.5
    """Term-frequency saturation."""
    b: float = 0.75
    """Length normalization."""
    method: str = "lucene"
    """bm25s scoring variant: lucene, robertson, atire, bm25l or bm25+."""
    stemmer: str = "english"
    """Snowball stemmer language (PyStemmer), or empty for none."""
    stopwords: str = "en"
    """bm25s stopword list, or empty for none."""

    def __post_init__(self) -> None:
        # Checked with bm25s's and PyStemmer's own lookups, so that a misspelled value fails
        # when the config is built, not once the corpus is pooled and the build reaches BM25.
        check_choice("index.bm25.method", self.method, BM25_METHODS)
        try:
            _infer_stopwords(self.stopwords or None)
        except ValueError as error:
            raise ValueError(f"index.bm25.stopwords={self.stopwords!r}: {error}") from None
        try:
            _make_stemmer(self.stemmer)
        except KeyError:
            raise ValueError(
                f"index.bm25.stemmer={self.stemmer!r} is not a PyStemmer language "
                "(Stemmer.algorithms(): english, porter, german...), or empty for none"
            ) from None


class KeywordIndex:
    """A bm25s index plus the tokenizer settings that queries must share with it."""

    def __init__(self, retriever: bm25s.BM25, config: BM25Config) -> None:
        self.retriever = retriever
        self.config = config
        self._stemmer = _make_stemmer(config.stemmer)

    @property
    def num_units(self) -> int:
        return int(self.retriever.scores["num_docs"])

    @classmethod
    def build(cls, text_batches: Iterable[Sequence[str]], config: BM25Config) -> KeywordIndex:
        """Index texts given in batches, in unit-id order, one batch in memory at a time."""
        builder = StreamingBM25(config)
        for batch in text_batches:
            builder.add(batch)
        return cls(builder.finish(), config)

    def tokenize_queries(self, queries: Sequence[str]) -> list[list[str]]:
        """Each query as bm25s tokenizes it with this index's stopwords and stemmer."""
        return bm25s.tokenize(
            list(queries),
            stopwords=self.config.stopwords or None,
            stemmer=self._stemmer,
            return_ids=False,
            show_progress=False,
        )

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k over the whole index for a batch of queries.

        Returns (unit_ids [num_queries, min(k, num_units)] int64, scores [same] float32),
        best first. Slots past the last matching unit hold id -1 and score 0: a query that
        shares no term with a unit does not retrieve it. Scores are bm25s's own
        (``BM25.get_scores``, bit for bit); see ``top_positive`` for the selection and the
        order of ties.
        """
        k = min(k, self.num_units)
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        if not queries or k == 0:
            return ids, scores
        for row, tokens in enumerate(self.tokenize_queries(queries)):
            units, unit_scores = top_positive(self.query_scores(tokens), k)
            ids[row, : len(units)] = units
            scores[row, : len(units)] = unit_scores
        return ids, scores

    def score_units(self, query: str, unit_ids: np.ndarray) -> np.ndarray:
        """[len(unit_ids)] BM25 scores of one query against the given units only."""
        tokens = self.tokenize_queries([query])[0]
        return self.query_scores(tokens)[unit_ids].astype(np.float32)

    def query_scores(self, tokens: list[str]) -> np.ndarray:
        """[num_units] scores of one tokenized query, as ``BM25.retrieve`` computes them.

        A query with no token left after stopwords scores 0 everywhere, as in bm25s
        (whose ``get_scores`` itself fails on an empty token list).
        """
        if not tokens:
            return np.zeros(self.num_units, dtype=self.retriever.dtype)
        return self.retriever.get_scores(tokens)

    def save(self, directory: Path) -> list[Path]:
        self.retriever.save(str(directory), show_progress=False)
        return sorted(p for p in directory.iterdir() if p.is_file())

    @classmethod
    def load(cls, directory: Path, config: BM25Config) -> KeywordIndex:
        retriever = bm25s.BM25.load(str(directory), show_progress=False)
        return cls(retriever, config)


def top_positive(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best units among those with a positive score: (unit ids, their scores).

    Best first; equal scores in ascending unit id, and where a tie straddles the k-th place
    the lowest ids are kept. ``scores`` is [num_units]; the results have at most ``k`` rows.

    Why not ``bm25s.BM25.retrieve``: it runs ``np.argpartition`` over all ``num_units``
    scores, and with numpy's AVX-512 selection that takes ~20x longer on BM25 arrays (about
    1% non-zero, the rest one repeated value) than on random ones: 28 ms at 200k units,
    against 0.1 ms for the scoring itself. Here the selection runs over the positive scores
    only. The result is bm25s's (same scores bit for bit, same units wherever the scores
    differ) except among equal scores, whose order in bm25s is whatever ``argpartition``
    and an unstable ``argsort`` leave (on real sentences, ascending in some tie groups and
    descending or mixed in others). Here it is fixed, and scoped searches
    (``CorpusIndex.search`` with a scope) select with this same function.
    """
    candidates = np.flatnonzero(scores > 0)
    values = scores[candidates]
    if len(candidates) > k:
        cut = len(values) - k
        threshold = np.partition(values, cut)[cut]
        above = np.flatnonzero(values > threshold)
        tied = np.flatnonzero(values == threshold)[: k - len(above)]
        keep = np.sort(np.concatenate([above, tied]))
        candidates, values = candidates[keep], values[keep]
    # Stable on ascending candidates: equal scores stay in unit-id order.
    order = np.argsort(-values, kind="stable")
    return candidates[order].astype(np.int64), values[order].astype(np.float32)


class StreamingBM25:
    """Accumulates BM25 term statistics batch by batch; ``finish`` returns the bm25s index.

    Memory while adding: the vocabulary (a dict entry per distinct word and per distinct stem)
    plus, per entry (a distinct term of a text), 8 bytes, and 12 bytes per text. ``finish``
    adds the index itself (8 bytes per entry) and one batch's scoring temporaries.
    """

    def __init__(self, config: BM25Config) -> None:
        self.config = config
        self._split = re.compile(TOKEN_PATTERN).findall
        self._stopwords = frozenset(_infer_stopwords(config.stopwords or None))
        self._stemmer = _make_stemmer(config.stemmer)
        self._word_ids: dict[str, int] = {}
        """Word -> word id, in order of first appearance."""
        self._word_terms = np.zeros(1024, dtype=np.int32)
        """The term (stem) id of each word id; a buffer that doubles, valid up to len(word_ids)."""
        self._term_ids: dict[str, int] = {}
        """Term (stem, or word without a stemmer) -> term id, in order of first appearance."""
        self._terms: list[np.ndarray] = []
        """Per batch, int32 term ids of each text's distinct terms, text by text."""
        self._counts: list[np.ndarray] = []
        """Per batch, int32 occurrences of those terms in their text."""
        self._distinct: list[np.ndarray] = []
        """Per batch, int32 number of distinct terms of each text."""
        self._lengths: list[np.ndarray] = []
        """Per batch, int64 number of tokens of each text (stopwords removed)."""

    def add(self, texts: Sequence[str]) -> None:
        """Tokenize one batch of texts (lower-case, split, drop stopwords, stem) and count."""
        word_ids, stopwords, split = self._word_ids, self._stopwords, self._split
        tokens: list[int] = []
        new_words: list[str] = []
        lengths = np.empty(len(texts), dtype=np.int64)
        for position, text in enumerate(texts):
            before = len(tokens)
            for word in split(text.lower()):
                if word in stopwords:
                    continue
                word_id = word_ids.get(word)
                if word_id is None:
                    word_id = word_ids[word] = len(word_ids)
                    new_words.append(word)
                tokens.append(word_id)
            lengths[position] = len(tokens) - before
        self._add_words(new_words)
        terms = self._word_terms[np.asarray(tokens, dtype=np.int64)]
        texts_of_tokens = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
        pairs, counts = np.unique((texts_of_tokens << 32) | terms, return_counts=True)
        self._terms.append((pairs & 0xFFFFFFFF).astype(np.int32))
        self._counts.append(counts.astype(np.int32))
        self._distinct.append(np.bincount(pairs >> 32, minlength=len(texts)).astype(np.int32))
        self._lengths.append(lengths)

    def _add_words(self, words: list[str]) -> None:
        """Give the words first seen in this batch (word ids ``len - len(words)`` on) a term."""
        stems = self._stemmer.stemWords(words) if self._stemmer is not None else words
        num_words = len(self._word_ids)
        if num_words > len(self._word_terms):
            grown = np.zeros(max(num_words, 2 * len(self._word_terms)), dtype=np.int32)
            grown[: len(self._word_terms)] = self._word_terms
            self._word_terms = grown
        term_ids = self._term_ids
        first = num_words - len(words)
        for position, stem in enumerate(stems, start=first):
            term_id = term_ids.get(stem)
            if term_id is None:
                term_id = term_ids[stem] = len(term_ids)
            self._word_terms[position] = term_id

    def finish(self) -> bm25s.BM25:
        """The bm25s index of every text added, as ``bm25s.BM25.index`` would build it.

        Each batch's entries are scored and placed straight into bm25s's column-major
        (term by term) arrays, then dropped: no array of all entries is made besides those.
        """
        config = self.config
        retriever = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
        lengths = np.concatenate([np.zeros(0, np.int64), *self._lengths])
        num_docs, num_terms = len(lengths), len(self._term_ids)
        frequency = np.zeros(num_terms, dtype=np.int64)
        for terms in self._terms:
            frequency += np.bincount(terms, minlength=num_terms)
        # Document frequencies as the dict bm25s's idf functions take: one entry per term.
        frequencies = dict(enumerate(frequency.tolist()))
        scoring = _Scoring(
            retriever, lengths, lengths.mean() if num_docs else 0.0, frequencies, num_docs
        )
        del frequencies
        indptr = np.zeros(num_terms + 1, dtype=np.int64)
        np.cumsum(frequency, out=indptr[1:])
        data = np.empty(int(indptr[-1]), dtype=retriever.dtype)
        indices = np.empty(int(indptr[-1]), dtype=np.int32)
        heads = indptr[:-1].copy()  # the next free slot of each term's column
        first_doc = 0
        batches = list(zip(self._terms, self._counts, self._distinct, strict=True))
        self._terms, self._counts, self._distinct, self._lengths = [], [], [], []
        while batches:
            terms, counts, distinct = batches.pop(0)
            docs = np.repeat(
                np.arange(first_doc, first_doc + len(distinct), dtype=np.int32), distinct
            )
            scores = scoring.scores(terms, counts, docs)
            # Stable: inside a term's column, documents stay in ascending order.
            order = np.argsort(terms, kind="stable")
            sorted_terms = terms[order]
            rank = np.arange(len(order)) - np.searchsorted(sorted_terms, sorted_terms)
            slots = heads[sorted_terms] + rank
            data[slots] = scores[order]
            indices[slots] = docs[order]
            present, count = np.unique(sorted_terms, return_counts=True)
            heads[present] += count
            first_doc += len(distinct)
        retriever.scores = {
            "data": data,
            "indices": indices,
            "indptr": indptr,
            "num_docs": num_docs,
        }
        retriever.nonoccurrence_array = scoring.nonoccurrence
        # As BM25.index does: an empty token after the last term, for queries without one.
        vocabulary = dict(self._term_ids)
        vocabulary.setdefault("", num_terms)
        retriever.vocab_dict = vocabulary
        retriever.unique_token_ids_set = set(vocabulary.values())
        return retriever


class _Scoring:
    """bm25s's score of each (text, term) entry: idf[term] x saturation(count, text length)."""

    def __init__(
        self,
        retriever: bm25s.BM25,
        lengths: np.ndarray,
        average_length: float,
        frequencies: dict[int, int],
        num_docs: int,
    ) -> None:
        self.retriever = retriever
        self.lengths = lengths
        self.average_length = average_length
        idf_of = _select_idf_scorer(retriever.idf_method)
        self.idf = _build_idf_array(frequencies, num_docs, idf_of, retriever.dtype)
        self.saturation = _select_tfc_scorer(retriever.method)
        self.nonoccurrence = None
        if retriever.method in retriever.methods_requiring_nonoccurrence:
            self.nonoccurrence = _build_nonoccurrence_array(
                frequencies, num_docs, idf_of, self.saturation, average_length, average_length,
                retriever.k1, retriever.b, retriever.delta, retriever.dtype,
            )  # fmt: skip

    def scores(self, terms: np.ndarray, counts: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """[entries] float64 scores of entries given by term, count and text id."""
        retriever = self.retriever
        saturation = self.saturation(
            tf_array=counts.astype(np.float32), l_d=self.lengths[docs], l_avg=self.average_length,
            k1=retriever.k1, b=retriever.b, delta=retriever.delta,
        )  # fmt: skip
        scores = self.idf[terms] * saturation
        if self.nonoccurrence is not None:
            scores -= self.nonoccurrence[terms]
        return scores


def _make_stemmer(language: str):
    if not language:
        return None
    import Stemmer

    return Stemmer.Stemmer(language)
