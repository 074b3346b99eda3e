"""Near-duplicate paragraphs found at index build, with MinHash (``datasketch``).

The pooled corpus stores identical paragraphs once (``grasp.corpus.corpus``). A paragraph
copied many times with a word changed here and there is stored every time, and can take every
top-K slot of a search: evidence poisoning. With ``index.near_duplicates.threshold`` set, a
paragraph whose estimated Jaccard similarity to a paragraph kept before it reaches the
threshold is stored as that paragraph instead (the first one seen wins), exactly as an
identical one would be; the manifest reports how many were dropped. A paragraph that supports
some question is never dropped: gold evidence stays in the corpus as the dataset gives it
(the questions are therefore read in full first, to know which paragraphs those are).

Similarity is over the set of lower-cased word ``shingle_words``-grams of the title and text.
MinHash estimates it from ``num_perm`` hash permutations; an LSH index finds the candidates and
each candidate's estimate is checked against the threshold before a paragraph is dropped.

    near = NearDuplicateFilter(NearDuplicateConfig(threshold=0.8))
    corpus = SentenceCorpus.from_questions(near.questions(questions))
    near.report()  # {"threshold": 0.8, ..., "paragraphs_dropped": 9, "sentences_dropped": 27}
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypedDict

from datasketch import MinHash, MinHashLSH

from grasp.corpus.corpus import paragraph_hash
from grasp.types import Paragraph, Question, check_range

_WORD = re.compile(r"\w+")


@dataclass
class NearDuplicateConfig:
    """Near-duplicate detection at index build (off by default)."""

    threshold: float = 0.0
    """Estimated Jaccard similarity at which a paragraph is a near-duplicate of one kept
    before it, in (0, 1]; 0: off (only identical paragraphs are stored once)."""
    num_perm: int = 128
    """MinHash permutations: more estimate the similarity more closely, and cost more."""
    shingle_words: int = 3
    """Words per shingle."""
    seed: int = 1
    """Seed of the MinHash permutations."""

    def __post_init__(self) -> None:
        check_range("index.near_duplicates.threshold", self.threshold, low=0, high=1)
        check_range("index.near_duplicates.num_perm", self.num_perm, low=16)
        check_range("index.near_duplicates.shingle_words", self.shingle_words, low=1)

    @property
    def enabled(self) -> bool:
        return self.threshold > 0


class NearDuplicateReport(TypedDict):
    """What the index manifest records of detection: ``NearDuplicateConfig``'s fields, then
    what they dropped."""

    threshold: float
    num_perm: int
    shingle_words: int
    seed: int
    paragraphs_dropped: int
    sentences_dropped: int


def shingles(paragraph: Paragraph, words: int) -> set[bytes]:
    """The lower-cased word ``words``-grams of the paragraph's title and text (one shingle of
    every word when it is shorter)."""
    tokens = _WORD.findall(f"{paragraph.title} {paragraph.text}".lower())
    if len(tokens) <= words:
        return {" ".join(tokens).encode("utf-8")}
    return {" ".join(tokens[i : i + words]).encode("utf-8") for i in range(len(tokens) - words + 1)}


def minhash(paragraph: Paragraph, config: NearDuplicateConfig) -> MinHash:
    """The paragraph's MinHash under ``config``."""
    signature = MinHash(num_perm=config.num_perm, seed=config.seed)
    signature.update_batch(sorted(shingles(paragraph, config.shingle_words)))
    return signature


def similarity(a: Paragraph, b: Paragraph, config: NearDuplicateConfig) -> float:
    """The MinHash estimate of the two paragraphs' Jaccard similarity."""
    return float(minhash(a, config).jaccard(minhash(b, config)))


class NearDuplicateFilter:
    """Streams questions, each near-duplicate paragraph replaced by the one it duplicates."""

    def __init__(self, config: NearDuplicateConfig) -> None:
        if not config.enabled:
            raise ValueError("index.near_duplicates.threshold is 0 (off): nothing to filter")
        self.config = config
        self._lsh = MinHashLSH(threshold=config.threshold, num_perm=config.num_perm)
        self._kept: dict[bytes, tuple[Paragraph, MinHash]] = {}
        """Content hash -> each paragraph kept, with its MinHash."""
        self._stored_as: dict[bytes, bytes] = {}
        """Content hash of every paragraph seen -> that of the paragraph stored for it."""
        self._protected: set[bytes] = set()
        """Content hashes of the supporting paragraphs: never dropped."""
        self.paragraphs_dropped = 0
        self.sentences_dropped = 0

    def questions(self, questions: Iterable[Question]) -> Iterator[Question]:
        """``questions``, each near-duplicate paragraph replaced by the paragraph kept for it.

        They are read in full before the first is yielded: every supporting paragraph must
        be known before any paragraph is dropped.
        """
        questions = list(questions)
        self._protected |= {
            paragraph_hash(p.title, p.sentences)
            for q in questions
            for p in q.paragraphs
            if p.is_supporting
        }
        for question in questions:
            paragraphs = tuple(self._stored(p) for p in question.paragraphs)
            if paragraphs != question.paragraphs:
                question = dataclasses.replace(question, paragraphs=paragraphs)
            yield question

    def _stored(self, paragraph: Paragraph) -> Paragraph:
        digest = paragraph_hash(paragraph.title, paragraph.sentences)
        stored = self._stored_as.get(digest)
        if stored is None:
            stored = self._classify(digest, paragraph)
        if stored == digest:
            return paragraph
        kept, _ = self._kept[stored]
        return Paragraph(kept.title, kept.sentences)  # a supporting paragraph is never dropped

    def _classify(self, digest: bytes, paragraph: Paragraph) -> bytes:
        """The hash of the paragraph stored for a paragraph seen the first time."""
        signature = minhash(paragraph, self.config)
        best, best_similarity = None, -1.0
        candidates = [] if digest in self._protected else self._lsh.query(signature)
        for candidate in sorted(candidates):  # sorted: the same choice each run
            value = signature.jaccard(self._kept[candidate][1])
            if value >= self.config.threshold and value > best_similarity:
                best, best_similarity = candidate, value
        if best is None:
            self._lsh.insert(digest, signature)
            self._kept[digest] = (paragraph, signature)
            best = digest
        else:
            self.paragraphs_dropped += 1
            self.sentences_dropped += len(paragraph.sentences)
        self._stored_as[digest] = best
        return best

    def report(self) -> NearDuplicateReport:
        """What the index manifest records: the settings and what they dropped."""
        return {
            **dataclasses.asdict(self.config),
            "paragraphs_dropped": self.paragraphs_dropped,
            "sentences_dropped": self.sentences_dropped,
        }
