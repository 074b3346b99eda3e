"""Build an index directory: the pooled corpus, then dense and BM25 indexes per granularity.

Layout of a built directory::

    manifest.json                 written last; its presence means the build is complete
    corpus/{sentences,paragraphs,questions}.parquet
    sentence/embeddings.npy       [num_sentences, dim] float32 unit vectors
    sentence/embeddings.key       which corpus and encoder produced them
    sentence/dense.faiss          FAISS index over the vectors
    sentence/bm25/                bm25s index
    paragraph/...                 the same for whole paragraphs

Encoding streams in shards of ``shard_size`` texts, each saved atomically as it finishes, so
an interrupted build resumes where it stopped. A build whose inputs are unchanged reuses
the directory as it is; a build that changes only the FAISS settings reuses the vectors.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from grasp.corpus.bm25 import BM25Config, KeywordIndex
from grasp.corpus.corpus import SentenceCorpus
from grasp.corpus.dense import DenseIndexConfig, build_dense_index, save_dense_index
from grasp.corpus.encoder import DenseEncoder, EncoderConfig
from grasp.corpus.manifest import (
    IndexDirectoryError,
    IndexMissingError,
    Manifest,
    describe_files,
    library_versions,
    stable_hash,
)
from grasp.types import Granularity, Question

log = logging.getLogger(__name__)

EMBEDDINGS_FILE = "embeddings.npy"
DENSE_FILE = "dense.faiss"
BM25_DIR = "bm25"


@dataclass
class IndexConfig:
    """What an index directory contains and how it is built."""

    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    """Dense encoder for documents and queries."""
    dense: DenseIndexConfig = field(default_factory=DenseIndexConfig)
    """FAISS index type and search parameters."""
    bm25: BM25Config = field(default_factory=BM25Config)
    """BM25 scoring and tokenization."""
    granularities: list[str] = field(default_factory=lambda: ["sentence", "paragraph"])
    """Which unit levels to index: sentence (GRASP's tools) and/or paragraph (ablations)."""
    prepend_title: bool = True
    """Index each sentence as "title: sentence" (the reader still sees the bare sentence)."""
    shard_size: int = 50_000
    """Texts encoded per resumable shard."""
    verify: str = "checksum"
    """On load: checksum (read every file) or size (faster for very large indexes)."""

    def build_fields(self) -> dict[str, Any]:
        """The settings that change what is built (not how it is searched)."""
        return {
            "encoder": {
                "model": self.encoder.model,
                "dtype": self.encoder.dtype,
                "max_seq_length": self.encoder.max_seq_length,
                "document_prefix": self.encoder.document_prefix,
            },
            "dense": {"factory": self.dense.factory, "train_sample": self.dense.train_sample},
            "bm25": asdict(self.bm25),
            "granularities": list(self.granularities),
            "prepend_title": self.prepend_title,
        }


def config_from_manifest(build_fields: dict[str, Any]) -> IndexConfig:
    """The IndexConfig that built an index, with default search-time settings."""
    config = IndexConfig(
        granularities=list(build_fields["granularities"]),
        prepend_title=build_fields["prepend_title"],
        bm25=BM25Config(**build_fields["bm25"]),
    )
    for name, value in build_fields["encoder"].items():
        setattr(config.encoder, name, value)
    for name, value in build_fields["dense"].items():
        setattr(config.dense, name, value)
    return config


def build_index(
    questions: Sequence[Question],
    config: IndexConfig,
    directory: Path,
    source: dict[str, Any] | None = None,
) -> Manifest:
    """Build (or reuse, or resume) the index of ``questions`` in ``directory``."""
    directory = Path(directory)
    granularities = [Granularity(g) for g in config.granularities]
    started = time.perf_counter()
    corpus = SentenceCorpus.from_questions(questions)
    fingerprint = corpus.fingerprint()
    build_key = stable_hash({"corpus": fingerprint, "config": config.build_fields()})
    reused = _reusable(directory, build_key, config)
    if reused is not None:
        log.info("index at %s is up to date; reusing it", directory)
        return reused
    directory.mkdir(parents=True, exist_ok=True)
    # Whatever happens next, a stale manifest must not vouch for a half-rebuilt directory.
    (directory / "manifest.json").unlink(missing_ok=True)
    timings = {"corpus": time.perf_counter() - started}
    files = corpus.save(directory / "corpus")
    encoder: DenseEncoder | None = None
    dimension = 0
    for granularity in granularities:
        unit_dir = directory / granularity.value
        unit_dir.mkdir(exist_ok=True)
        embeddings_key = stable_hash(
            {"corpus": fingerprint, "granularity": granularity.value, **config.build_fields()}
        )
        t0 = time.perf_counter()
        if not _embeddings_current(unit_dir, embeddings_key):
            encoder = encoder or DenseEncoder(config.encoder)
            encode_units(corpus, granularity, config, encoder, unit_dir, embeddings_key)
        timings[f"{granularity}/encode"] = time.perf_counter() - t0
        vectors = np.load(unit_dir / EMBEDDINGS_FILE, mmap_mode="r")
        dimension = int(vectors.shape[1])
        t0 = time.perf_counter()
        save_dense_index(build_dense_index(vectors, config.dense), unit_dir / DENSE_FILE)
        timings[f"{granularity}/dense_index"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        texts = corpus.unit_texts(granularity, config.prepend_title)
        keyword = KeywordIndex.build(texts, config.bm25)
        shutil.rmtree(unit_dir / BM25_DIR, ignore_errors=True)
        files += keyword.save(unit_dir / BM25_DIR)
        timings[f"{granularity}/bm25_index"] = time.perf_counter() - t0
        files += [unit_dir / EMBEDDINGS_FILE, unit_dir / DENSE_FILE]
    timings["total"] = time.perf_counter() - started
    manifest = Manifest(
        build_key=build_key,
        config=config.build_fields(),
        corpus={
            "fingerprint": fingerprint,
            "num_sentences": corpus.num_sentences,
            "num_paragraphs": corpus.num_paragraphs,
            "num_questions": corpus.num_questions,
            "source": source or {},
        },
        dimension=dimension,
        files=describe_files(directory, files),
        versions=library_versions(),
        timings=timings,
    )
    manifest.write(directory)
    return manifest


def encode_units(
    corpus: SentenceCorpus,
    granularity: Granularity,
    config: IndexConfig,
    encoder: DenseEncoder,
    unit_dir: Path,
    embeddings_key: str,
) -> Path:
    """Encode every unit into ``unit_dir/embeddings.npy``, one resumable shard at a time."""
    shard_dir = unit_dir / "shards"
    key_file = shard_dir / "key"
    if shard_dir.exists() and (not key_file.exists() or key_file.read_text() != embeddings_key):
        shutil.rmtree(shard_dir)  # shards of another corpus or encoder: useless here
    shard_dir.mkdir(parents=True, exist_ok=True)
    key_file.write_text(embeddings_key)
    total = corpus.num_units(granularity)
    shard_paths = []
    texts = corpus.unit_texts(granularity, config.prepend_title, batch_size=config.shard_size)
    with tqdm(total=total, desc=f"encode {granularity}s", unit="text") as progress:
        for number, shard_texts in enumerate(texts):
            path = shard_dir / f"{number:05d}.npy"
            shard_paths.append(path)
            if path.exists():
                progress.update(len(shard_texts))
                continue
            _save_atomic(path, _encode_sorted(encoder, shard_texts, progress))
    output = unit_dir / EMBEDDINGS_FILE
    tmp = unit_dir / (EMBEDDINGS_FILE + ".tmp")
    merged = np.lib.format.open_memmap(
        tmp, mode="w+", dtype=np.float32, shape=(total, encoder.dimension)
    )
    row = 0
    for path in shard_paths:
        shard = np.load(path, mmap_mode="r")
        merged[row : row + len(shard)] = shard
        row += len(shard)
    merged.flush()
    del merged
    os.replace(tmp, output)
    (unit_dir / "embeddings.key").write_text(embeddings_key)
    shutil.rmtree(shard_dir)
    return output


def _encode_sorted(encoder: DenseEncoder, texts: list[str], progress: tqdm) -> np.ndarray:
    """[len(texts), dim] vectors, encoded shortest first: batches of similar length pad less."""
    order = np.argsort([len(text) for text in texts], kind="stable")
    vectors = np.empty((len(texts), encoder.dimension), dtype=np.float32)
    for start in range(0, len(texts), 2048):
        rows = order[start : start + 2048]
        vectors[rows] = encoder.encode_documents([texts[i] for i in rows])
        progress.update(len(rows))
    return vectors


def _save_atomic(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as handle:
        np.save(handle, array)
    os.replace(tmp, path)


def _embeddings_current(unit_dir: Path, key: str) -> bool:
    key_file = unit_dir / "embeddings.key"
    return (
        (unit_dir / EMBEDDINGS_FILE).exists() and key_file.exists() and key_file.read_text() == key
    )


def _reusable(directory: Path, build_key: str, config: IndexConfig) -> Manifest | None:
    try:
        manifest = Manifest.read(directory)
    except IndexMissingError:
        return None
    except IndexDirectoryError as error:
        log.warning("rebuilding %s: %s", directory, error)
        return None
    if manifest.build_key != build_key:
        return None
    try:
        manifest.verify_files(directory, checksums=config.verify == "checksum")
    except IndexDirectoryError as error:
        log.warning("rebuilding %s: %s", directory, error)
        return None
    return manifest
