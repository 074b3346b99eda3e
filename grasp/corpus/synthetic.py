"""Scaling corpora for retrieval benchmarks, made from the real bundled sentences.

The bundled dev sets hold about 58.6k unique real sentences. Benchmarks that need 200k or 1M
sentences extend them by splicing (``CORPUS_METHOD``), and extend real embeddings by mixing
(``VECTOR_METHODS``), so that text statistics and vector geometry stay close to real data.
Used by ``scripts/bench_retrieval.py`` and ``scripts/bench_build.py``; nothing else in the package
depends on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from grasp.types import DatasetName, Paragraph, Question, StrEnum

CORPUS_METHOD = (
    "real: every sentence of the bundled dev sets, paragraphs de-duplicated by title and "
    "sentences, then sentences de-duplicated and empty ones dropped, paragraphs shuffled (seed); "
    "the first N sentences in that order. Beyond the real pool: spliced copies of the real "
    "paragraphs under the same titles, each sentence = its own first 30-70% of words + the "
    "words after a 30-70% cut of another random real sentence."
)


class VectorMethod(StrEnum):
    """How vectors beyond the real embeddings are made (see ``VECTOR_METHODS``)."""

    MIX = "mix"
    TILE = "tile"


VECTOR_METHODS = {
    VectorMethod.MIX: (
        "first size: real MiniLM embeddings of its texts (title: sentence), from build_index. "
        "Larger sizes: those real embeddings in the first rows; every further row i = "
        "w * e[i mod n] + (1 - w) * e[j], j random, w ~ U(0.3, 0.7), + N(0, sigma^2) noise per "
        "dimension, L2-renormalized. Query vectors are real."
    ),
    VectorMethod.TILE: (
        "first size: real MiniLM embeddings of its texts (title: sentence), from build_index. "
        "Larger sizes: those real embeddings in the first rows; every further row i = "
        "e[i mod n] + N(0, sigma^2) noise per dimension, L2-renormalized (near-duplicate "
        "clusters: HNSW recall reads low). Query vectors are real."
    ),
}
PARAGRAPHS_PER_PLACEHOLDER = 10


@dataclass
class RealPool:
    """The real sentences of the bundled dev sets, by paragraph, and their questions."""

    titles: list[str]
    """Title of each paragraph, in the (shuffled) order the corpus takes them."""
    paragraphs: list[list[str]]
    """Sentences of each paragraph: none empty, none repeated anywhere in the pool."""
    questions: list[str]
    """Unique question texts, shuffled: the queries."""

    @property
    def num_sentences(self) -> int:
        return sum(len(sentences) for sentences in self.paragraphs)


def load_real_pool(paths: Sequence[Path], seed: int) -> RealPool:
    """Pool the paragraphs and questions of normalized JSONL files (titles and sentences only)."""
    seen_paragraphs: set[tuple[str, tuple[str, ...]]] = set()
    seen_sentences: set[str] = set()
    titles: list[str] = []
    paragraphs: list[list[str]] = []
    questions: dict[str, None] = {}
    for path in paths:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                questions.setdefault(record["question"], None)
                for paragraph in record["paragraphs"]:
                    key = (paragraph["title"], tuple(paragraph["sentences"]))
                    if key in seen_paragraphs:
                        continue
                    seen_paragraphs.add(key)
                    fresh = []
                    for sentence in paragraph["sentences"]:
                        if sentence.strip() and sentence not in seen_sentences:
                            seen_sentences.add(sentence)
                            fresh.append(sentence)
                    if fresh:
                        titles.append(paragraph["title"])
                        paragraphs.append(fresh)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(paragraphs)).tolist()
    question_list = list(questions)
    question_order = rng.permutation(len(question_list)).tolist()
    return RealPool(
        titles=[titles[i] for i in order],
        paragraphs=[paragraphs[i] for i in order],
        questions=[question_list[i] for i in question_order],
    )


def corpus_paragraphs(pool: RealPool, size: int, seed: int) -> Iterator[Paragraph]:
    """Paragraphs holding exactly ``size`` sentences: the real pool first, then spliced ones."""
    remaining = size
    for title, sentences in zip(pool.titles, pool.paragraphs, strict=True):
        if remaining == 0:
            return
        taken = sentences[:remaining]
        remaining -= len(taken)
        yield Paragraph(title, tuple(taken))
    yield from spliced_paragraphs(pool, remaining, seed)


def spliced_paragraphs(pool: RealPool, count: int, seed: int) -> Iterator[Paragraph]:
    """Paragraphs of ``count`` sentences spliced from the real ones (see CORPUS_METHOD)."""
    rng = np.random.default_rng(seed)
    words = [sentence.split() for sentences in pool.paragraphs for sentence in sentences]
    remaining = count
    with tqdm(total=count, desc="splice sentences", unit="sentence", disable=count < 50_000) as bar:
        while remaining > 0:
            sentence_id = 0
            for title, sentences in zip(pool.titles, pool.paragraphs, strict=True):
                n = min(len(sentences), remaining)
                partners = rng.integers(len(words), size=n).tolist()
                head_cuts, tail_cuts = rng.uniform(0.3, 0.7, size=(2, n)).tolist()
                spliced = []
                for j in range(n):
                    own, other = words[sentence_id + j], words[partners[j]]
                    head = own[: max(1, round(len(own) * head_cuts[j]))]
                    tail = other[round(len(other) * tail_cuts[j]) :]
                    spliced.append(" ".join(head + tail))
                sentence_id += len(sentences)
                remaining -= n
                bar.update(n)
                yield Paragraph(title, tuple(spliced))
                if remaining == 0:
                    return


def as_questions(paragraphs: Iterable[Paragraph]) -> Iterator[Question]:
    """Wrap paragraphs in placeholder questions: the corpus and index builders pool questions."""
    batch: list[Paragraph] = []
    number = 0
    for paragraph in paragraphs:
        batch.append(paragraph)
        if len(batch) == PARAGRAPHS_PER_PLACEHOLDER:
            yield _placeholder(number, batch)
            batch, number = [], number + 1
    if batch:
        yield _placeholder(number, batch)


def _placeholder(number: int, paragraphs: list[Paragraph]) -> Question:
    return Question(f"bench-{number}", DatasetName.HOTPOTQA, "", (), "bench", tuple(paragraphs), ())


def corpus_vectors(
    base: np.ndarray, size: int, method: VectorMethod, sigma: float, seed: int
) -> np.ndarray:
    """[size, dim] float32 unit vectors: ``base`` [n, dim] first, then synthetic rows."""
    vectors = np.empty((size, base.shape[1]), dtype=np.float32)
    real = min(size, len(base))
    vectors[:real] = base[:real]
    rng = np.random.default_rng(seed)
    for start in range(real, size, 65_536):
        stop = min(size, start + 65_536)
        chunk = base[np.arange(start, stop) % len(base)]
        if method is VectorMethod.MIX:
            weight = rng.uniform(0.3, 0.7, size=(stop - start, 1)).astype(np.float32)
            partner = base[rng.integers(len(base), size=stop - start)]
            chunk = weight * chunk + (1 - weight) * partner
        chunk += sigma * rng.standard_normal(chunk.shape, dtype=np.float32)
        chunk /= np.linalg.norm(chunk, axis=1, keepdims=True)
        vectors[start:stop] = chunk
    return vectors
