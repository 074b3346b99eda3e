"""The pooled sentence corpus: every sentence with its parent paragraph id f(s), stored by column.

All paragraphs of a split are pooled into one corpus, as GRASP's indexes are. Identical
paragraphs (same title and sentences) are stored once, found by a content hash. Sentence ids
and paragraph ids are row numbers, assigned in order of first appearance, so the same input
always gives the same ids. The sentences of a paragraph are contiguous: paragraph ``p`` owns
sentence ids ``first_sentence[p] .. first_sentence[p] + num_sentences[p] - 1``, which makes
f(s) and its inverse two array lookups.

Texts live in Arrow string arrays (one buffer and one offset per string), not one Python
object per sentence: 3.6 million sentences cost their UTF-8 bytes plus 12 bytes of ids each.

Each question's own paragraphs are kept as well (``question_paragraph_ids``), for the
per-question distractor scope and for mapping gold paragraphs to paragraph ids.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from grasp.types import Granularity, Paragraph, Question

SENTENCES_FILE = "sentences.parquet"
PARAGRAPHS_FILE = "paragraphs.parquet"
QUESTIONS_FILE = "questions.parquet"
CORPUS_FILES = (SENTENCES_FILE, PARAGRAPHS_FILE, QUESTIONS_FILE)
ARROW_CHUNK = 65_536
"""Sentences gathered as Python strings before they move into an Arrow array."""


def paragraph_hash(title: str, sentences: Sequence[str]) -> bytes:
    """16-byte content hash of a paragraph; equal title and sentences give equal hashes."""
    h = hashlib.blake2b(digest_size=16)
    h.update(title.encode("utf-8"))
    for sentence in sentences:
        # A separator that cannot occur in text keeps ("ab", "c") apart from ("a", "bc").
        h.update(b"\x1f")
        h.update(sentence.encode("utf-8"))
    return h.digest()


@dataclass
class SentenceCorpus:
    """Columnar sentence corpus. Build it with ``from_questions`` or ``load``."""

    sentence_text: pa.LargeStringArray
    """[num_sentences] text of each sentence."""
    sentence_paragraph_id: np.ndarray
    """[num_sentences] int32: f(s), the parent paragraph of each sentence."""
    paragraph_title: pa.LargeStringArray
    """[num_paragraphs] title of each paragraph."""
    paragraph_first_sentence: np.ndarray
    """[num_paragraphs] int64: sentence id of each paragraph's first sentence."""
    paragraph_num_sentences: np.ndarray
    """[num_paragraphs] int32: number of sentences of each paragraph."""
    paragraph_hash: pa.FixedSizeBinaryArray
    """[num_paragraphs] 16-byte content hash of each paragraph."""
    question_ids: pa.LargeStringArray
    """[num_questions] ids of the questions whose paragraphs were pooled."""
    question_offsets: np.ndarray
    """[num_questions + 1] int64: question q owns question_paragraph_ids[off[q]:off[q+1]]."""
    question_paragraph_ids: np.ndarray
    """[sum of paragraphs per question] int32: each question's paragraphs, in its own order."""

    def __post_init__(self) -> None:
        self._question_row: dict[str, int] | None = None
        self._hash_to_paragraph: dict[bytes, int] | None = None

    # ------------------------------------------------------------------ building

    @classmethod
    def from_questions(cls, questions: Iterable[Question]) -> SentenceCorpus:
        """Pool the paragraphs of ``questions`` into one de-duplicated corpus.

        ``questions`` may be a generator: it is read once. Sentences move into Arrow arrays
        every ``ARROW_CHUNK`` sentences and ids are kept in typed arrays, so the memory used
        is the corpus itself plus one chunk of Python strings and the paragraph hash table.
        """
        text_chunks: list[pa.Array] = []
        texts: list[str] = []
        num_sentences = 0
        sentence_pid = array("i")
        titles: list[str] = []
        first = array("q")
        counts = array("i")
        hashes: list[bytes] = []
        hash_to_pid: dict[bytes, int] = {}
        question_ids: list[str] = []
        offsets = array("q", [0])
        question_pids = array("i")
        for question in questions:
            question_ids.append(question.question_id)
            for paragraph in question.paragraphs:
                digest = paragraph_hash(paragraph.title, paragraph.sentences)
                pid = hash_to_pid.get(digest)
                if pid is None:
                    pid = len(titles)
                    hash_to_pid[digest] = pid
                    titles.append(paragraph.title)
                    first.append(num_sentences)
                    counts.append(len(paragraph.sentences))
                    hashes.append(digest)
                    texts.extend(paragraph.sentences)
                    num_sentences += len(paragraph.sentences)
                    sentence_pid.extend([pid] * len(paragraph.sentences))
                    if len(texts) >= ARROW_CHUNK:
                        text_chunks.append(pa.array(texts, type=pa.large_string()))
                        texts = []
                question_pids.append(pid)
            offsets.append(len(question_pids))
        text_chunks.append(pa.array(texts, type=pa.large_string()))
        corpus = cls(
            sentence_text=pa.concat_arrays(text_chunks),
            sentence_paragraph_id=np.frombuffer(sentence_pid, dtype=np.int32).copy(),
            paragraph_title=pa.array(titles, type=pa.large_string()),
            paragraph_first_sentence=np.frombuffer(first, dtype=np.int64).copy(),
            paragraph_num_sentences=np.frombuffer(counts, dtype=np.int32).copy(),
            paragraph_hash=pa.array(hashes, type=pa.binary(16)),
            question_ids=pa.array(question_ids, type=pa.large_string()),
            question_offsets=np.frombuffer(offsets, dtype=np.int64).copy(),
            question_paragraph_ids=np.frombuffer(question_pids, dtype=np.int32).copy(),
        )
        corpus._hash_to_paragraph = hash_to_pid
        return corpus

    # ------------------------------------------------------------------ sizes and lookups

    @property
    def num_sentences(self) -> int:
        return len(self.sentence_text)

    @property
    def num_paragraphs(self) -> int:
        return len(self.paragraph_title)

    @property
    def num_questions(self) -> int:
        return len(self.question_ids)

    def num_units(self, granularity: Granularity) -> int:
        """Number of retrievable units at ``granularity``."""
        if granularity is Granularity.SENTENCE:
            return self.num_sentences
        return self.num_paragraphs

    def sentence(self, sentence_id: int) -> str:
        return self.sentence_text[sentence_id].as_py()

    def title(self, paragraph_id: int) -> str:
        return self.paragraph_title[paragraph_id].as_py()

    def paragraph_of(self, sentence_id: int) -> int:
        """f(s): the parent paragraph id of a sentence."""
        return int(self.sentence_paragraph_id[sentence_id])

    def sentence_ids(self, paragraph_id: int) -> range:
        """The ordered sentence ids of a paragraph."""
        start = int(self.paragraph_first_sentence[paragraph_id])
        return range(start, start + int(self.paragraph_num_sentences[paragraph_id]))

    def paragraph_sentences(self, paragraph_id: int) -> list[str]:
        ids = self.sentence_ids(paragraph_id)
        return self.sentence_text.slice(ids.start, len(ids)).to_pylist()

    def paragraph_text(self, paragraph_id: int) -> str:
        """The paragraph's sentences joined by one space (empty sentences dropped)."""
        return " ".join(s for s in self.paragraph_sentences(paragraph_id) if s)

    def paragraph(self, paragraph_id: int) -> Paragraph:
        return Paragraph(self.title(paragraph_id), tuple(self.paragraph_sentences(paragraph_id)))

    def has_sentence(self, sentence_id: int) -> bool:
        return 0 <= sentence_id < self.num_sentences

    def has_paragraph(self, paragraph_id: int) -> bool:
        return 0 <= paragraph_id < self.num_paragraphs

    def question_scope(self, question_id: str) -> np.ndarray:
        """[paragraphs of the question] int32 paragraph ids, in the question's own order.

        Raises KeyError naming the question when it was not pooled into this corpus.
        """
        if self._question_row is None:
            self._question_row = {qid: i for i, qid in enumerate(self.question_ids.to_pylist())}
        row = self._question_row.get(question_id)
        if row is None:
            raise KeyError(f"question {question_id!r} is not part of this corpus")
        start, stop = self.question_offsets[row], self.question_offsets[row + 1]
        return self.question_paragraph_ids[start:stop]

    def paragraph_id_of(self, paragraph: Paragraph) -> int | None:
        """The id of a paragraph with this exact title and sentences, or None."""
        if self._hash_to_paragraph is None:
            self._hash_to_paragraph = {h: i for i, h in enumerate(self.paragraph_hash.to_pylist())}
        return self._hash_to_paragraph.get(paragraph_hash(paragraph.title, paragraph.sentences))

    def gold_paragraph_ids(self, question: Question) -> frozenset[int]:
        """D_g: corpus ids of the question's supporting paragraphs.

        Raises KeyError when a gold paragraph is missing from the corpus: scoring against
        a corpus that cannot contain the evidence would silently give zero recall.
        """
        ids = set()
        for index in question.gold_paragraph_indices:
            pid = self.paragraph_id_of(question.paragraphs[index])
            if pid is None:
                title = question.paragraphs[index].title
                raise KeyError(
                    f"gold paragraph {title!r} of question {question.question_id!r} "
                    "is not in this corpus"
                )
            ids.add(pid)
        return frozenset(ids)

    def scope_units(self, paragraph_ids: np.ndarray, granularity: Granularity) -> np.ndarray:
        """[units] int64 unit ids (sentence or paragraph ids) inside the given paragraphs."""
        pids = np.unique(np.asarray(paragraph_ids, dtype=np.int64))
        if granularity is Granularity.PARAGRAPH:
            return pids
        starts = self.paragraph_first_sentence[pids]
        counts = self.paragraph_num_sentences[pids].astype(np.int64)
        if counts.sum() == 0:
            return np.zeros(0, dtype=np.int64)
        # Vectorized concatenation of the ranges [start, start + count).
        offsets = np.repeat(starts - np.cumsum(counts) + counts, counts)
        return offsets + np.arange(counts.sum(), dtype=np.int64)

    # ------------------------------------------------------------------ texts for indexing

    def unit_texts(
        self, granularity: Granularity, prepend_title: bool, batch_size: int = 8192
    ) -> Iterator[list[str]]:
        """Batches of the texts an index sees, in unit-id order.

        Sentences are indexed with their paragraph's title in front when ``prepend_title``
        (a sentence such as "He was born in 1961." says nothing on its own); the text shown
        to a reader is always the bare sentence.
        """
        n = self.num_units(granularity)
        for start in range(0, n, batch_size):
            stop = min(n, start + batch_size)
            if granularity is Granularity.PARAGRAPH:
                texts = [self.paragraph_text(pid) for pid in range(start, stop)]
                titles = self.paragraph_title.slice(start, stop - start).to_pylist()
            else:
                texts = self.sentence_text.slice(start, stop - start).to_pylist()
                pids = self.sentence_paragraph_id[start:stop]
                titles = self.paragraph_title.take(pa.array(pids)).to_pylist()
            if prepend_title or granularity is Granularity.PARAGRAPH:
                texts = [f"{title}: {text}" for title, text in zip(titles, texts, strict=True)]
            yield texts

    # ------------------------------------------------------------------ persistence

    def fingerprint(self) -> str:
        """Hex digest of the corpus content: paragraph hashes, their order and the questions."""
        h = hashlib.blake2b(digest_size=16)
        h.update(b"".join(self.paragraph_hash.to_pylist()))
        h.update(self.question_offsets.astype(np.int64).tobytes())
        h.update(self.question_paragraph_ids.astype(np.int32).tobytes())
        h.update("\n".join(self.question_ids.to_pylist()).encode("utf-8"))
        return h.hexdigest()

    def save(self, directory: Path) -> list[Path]:
        """Write the corpus as three Parquet files; returns their paths."""
        directory.mkdir(parents=True, exist_ok=True)
        tables = {
            SENTENCES_FILE: pa.table(
                {"text": self.sentence_text, "paragraph_id": self.sentence_paragraph_id}
            ),
            PARAGRAPHS_FILE: pa.table(
                {
                    "title": self.paragraph_title,
                    "first_sentence": self.paragraph_first_sentence,
                    "num_sentences": self.paragraph_num_sentences,
                    "hash": self.paragraph_hash,
                }
            ),
            QUESTIONS_FILE: pa.table(
                {
                    "question_id": self.question_ids,
                    "paragraph_ids": pa.LargeListArray.from_arrays(
                        pa.array(self.question_offsets), pa.array(self.question_paragraph_ids)
                    ),
                }
            ),
        }
        paths = []
        for name, table in tables.items():
            path = directory / name
            pq.write_table(table, path)
            paths.append(path)
        return paths

    @classmethod
    def load(cls, directory: Path) -> SentenceCorpus:
        """Read a corpus written by ``save``."""
        sentences = pq.read_table(directory / SENTENCES_FILE)
        paragraphs = pq.read_table(directory / PARAGRAPHS_FILE)
        questions = pq.read_table(directory / QUESTIONS_FILE)
        lists = questions.column("paragraph_ids").combine_chunks()
        return cls(
            sentence_text=sentences.column("text").combine_chunks(),
            sentence_paragraph_id=sentences.column("paragraph_id").to_numpy(),
            paragraph_title=paragraphs.column("title").combine_chunks(),
            paragraph_first_sentence=paragraphs.column("first_sentence").to_numpy(),
            paragraph_num_sentences=paragraphs.column("num_sentences").to_numpy(),
            paragraph_hash=paragraphs.column("hash").combine_chunks(),
            question_ids=questions.column("question_id").combine_chunks(),
            question_offsets=lists.offsets.to_numpy().astype(np.int64),
            question_paragraph_ids=lists.values.to_numpy().astype(np.int32),
        )

    def nbytes(self) -> int:
        """Bytes held in memory by the corpus columns."""
        arrays = [self.sentence_text, self.paragraph_title, self.paragraph_hash, self.question_ids]
        numpy_arrays = [
            self.sentence_paragraph_id,
            self.paragraph_first_sentence,
            self.paragraph_num_sentences,
            self.question_offsets,
            self.question_paragraph_ids,
        ]
        return sum(a.nbytes for a in arrays) + sum(a.nbytes for a in numpy_arrays)
