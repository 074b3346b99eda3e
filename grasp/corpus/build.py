"""Build an index directory: the pooled corpus, then dense and BM25 indexes per granularity.

Layout of a built directory::

    manifest.json                 written last; its presence means the build is complete
    corpus/{sentences,paragraphs,questions}.parquet
    sentence/embeddings.npy       [num_sentences, dim] float32 unit vectors
    sentence/dense.faiss          FAISS index over the vectors (its storage: dense.factory)
    sentence/bm25/                bm25s index
    sentence/*.key                which inputs produced each of the three (see below)
    paragraph/...                 the same for whole paragraphs

Every stage streams, so that memory does not hold the corpus several times over:

- encoding runs in shards of ``shard_size`` texts, each saved atomically with its checksum as
  soon as it is encoded; an interrupted build resumes at the first unfinished shard. The
  shards are then appended to ``embeddings.npy`` one at a time;
- the FAISS index is trained on a bounded sample (``dense.train_sample``) and filled block by
  block from ``embeddings.npy`` read from disk, so a compressed index (``SQfp16``, ``PQ48``)
  never needs the float32 matrix in memory;
- BM25 tokenizes one batch of ``shard_size`` texts at a time (``StreamingBM25``).

Each finished stage writes a key file naming its inputs (corpus fingerprint and the settings
it depends on). A build whose inputs are unchanged reuses the whole directory; otherwise a
stage whose key still matches is kept: a build that changes only ``dense.factory`` re-uses
the vectors and the BM25 index and builds the FAISS index alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
from tqdm.auto import tqdm

from grasp.corpus.bm25 import BM25Config, KeywordIndex
from grasp.corpus.corpus import (
    PARAGRAPHS_FILE,
    QUESTIONS_FILE,
    SENTENCES_FILE,
    SentenceCorpus,
)
from grasp.corpus.dense import (
    DenseIndexConfig,
    VectorFile,
    build_dense_index,
    save_dense_index,
)
from grasp.corpus.encoder import DenseEncoder, EncoderConfig
from grasp.corpus.fusion import FusionConfig
from grasp.corpus.index_path import check_index_path
from grasp.corpus.manifest import (
    MANIFEST_FILE,
    IndexCorruptError,
    IndexDirectoryError,
    IndexMissingError,
    Manifest,
    ManifestError,
    describe_files,
    file_sha256,
    library_versions,
    stable_hash,
)
from grasp.corpus.near_duplicates import NearDuplicateConfig, NearDuplicateFilter
from grasp.types import Granularity, Question, StrEnum, check_range, parse_enum

log = logging.getLogger(__name__)

EMBEDDINGS_FILE = "embeddings.npy"
DENSE_FILE = "dense.faiss"
BM25_DIR = "bm25"
BM25_FILES = (
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
    "params.index.json",
    "vocab.index.json",
)
"""The files ``bm25s.BM25.load`` reads from ``bm25/``."""
BM25_NONOCCURRENCE_FILE = "nonoccurrence_array.index.npy"
"""Also read by ``bm25s.BM25.load`` whenever it exists (bm25l and bm25+ write it)."""
SHARD_DIR = "shards"
EMBEDDINGS_KEY = "embeddings.key"
DENSE_KEY = "dense.key"
BM25_KEY = "bm25.key"
STAGE_KEYS = (EMBEDDINGS_KEY, DENSE_KEY, BM25_KEY)

StageListener = Callable[[str], None]
"""Told the name of each build stage (``corpus``, ``sentence/encode``...) as it starts."""


class VerifyMode(StrEnum):
    """How loading (and reusing) an index checks its files against the manifest."""

    CHECKSUM = "checksum"
    """Size and SHA-256 of every file: reads the whole index once per load."""
    SIZE = "size"
    """Sizes only: faster on very large indexes, but blind to a same-size change."""


class EncoderFields(TypedDict):
    model: str
    dtype: str
    max_seq_length: int
    document_prefix: str


class DenseFields(TypedDict):
    factory: str
    train_sample: int


class _BuiltFields(TypedDict):
    encoder: EncoderFields
    dense: DenseFields
    bm25: dict[str, Any]
    """``BM25Config``'s fields."""
    granularities: list[str]
    prepend_title: bool


class BuildFields(_BuiltFields, total=False):
    """The settings that change what is built (``IndexConfig.build_fields``): the manifest's
    ``config``, and part of the build key."""

    near_duplicates: dict[str, Any]
    """``NearDuplicateConfig``'s fields, when detection is on."""


@dataclass
class IndexConfig:
    """What an index directory contains and how it is built."""

    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    """Dense encoder for documents and queries."""
    dense: DenseIndexConfig = field(default_factory=DenseIndexConfig)
    """FAISS index type (the vectors' storage) and search parameters."""
    bm25: BM25Config = field(default_factory=BM25Config)
    """BM25 scoring and tokenization."""
    fusion: FusionConfig = field(default_factory=FusionConfig)
    """How hybrid search fuses the dense and the BM25 ranking (search-time)."""
    granularities: list[str] = field(default_factory=lambda: ["sentence", "paragraph"])
    """Which unit levels to index: sentence (GRASP's tools) and/or paragraph (ablations)."""
    prepend_title: bool = True
    """Index each sentence as "title: sentence" (the reader still sees the bare sentence)."""
    near_duplicates: NearDuplicateConfig = field(default_factory=NearDuplicateConfig)
    """MinHash near-duplicate detection at build (grasp/corpus/near_duplicates.py); off by
    default. When on, near-duplicate paragraphs are stored once, and the manifest says how
    many were dropped."""
    shard_size: int = 50_000
    """Texts per resumable encoding shard, and per BM25 tokenization batch."""
    verify: str = VerifyMode.CHECKSUM.value
    """On load: checksum (read every file) or size (faster for very large indexes)."""
    remote_url: str | None = None
    """URL of a retrieval service (scripts/serve_retrieval.py) to search instead of loading
    the index in this process, e.g. http://host:8000; None: load the index directory here."""
    remote_timeout_s: float = 60.0
    """Seconds one request to the retrieval service may take before it is retried."""
    remote_retries: int = 5
    """Retries of a request that found the service unreachable or failing (5xx), with backoff."""

    def __post_init__(self) -> None:
        # A value outside the enum must fail here, at config load: compared as a string, a
        # misspelled "checksums" silently meant "size" (issue 18, 5.3).
        self.verify = parse_enum(VerifyMode, self.verify, "index.verify")
        # Kept as strings (they go into the manifest as written); [] built an empty index.
        for granularity in self.granularities:
            parse_enum(Granularity, granularity, "index.granularities")
        if not self.granularities or len(set(self.granularities)) != len(self.granularities):
            raise ValueError(
                "index.granularities must list sentence and/or paragraph, each once, "
                f"got {list(self.granularities)}"
            )
        check_range("index.shard_size", self.shard_size, low=1)
        if isinstance(self.fusion, dict):  # as rebuilt from JSON (the retrieval client)
            self.fusion = FusionConfig(**self.fusion)
        if isinstance(self.near_duplicates, dict):
            self.near_duplicates = NearDuplicateConfig(**self.near_duplicates)

    def checksums(self) -> bool:
        """Whether files are checked by checksum (``verify``, checked again if reassigned)."""
        return parse_enum(VerifyMode, self.verify, "index.verify") is VerifyMode.CHECKSUM

    def build_fields(self) -> BuildFields:
        """The settings that change what is built (not how it is searched).

        Near-duplicate detection is named only when it is on: indexes built before it
        existed keep their build key and still match a configuration that leaves it off.
        """
        fields: BuildFields = {
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
        if self.near_duplicates.enabled:
            fields["near_duplicates"] = asdict(self.near_duplicates)
        return fields


def config_from_manifest(build_fields: dict[str, Any], where: Path) -> IndexConfig:
    """The IndexConfig that built an index, with default search-time settings.

    ``build_fields`` is a checked manifest's ``config``; a setting this code does not know
    raises ManifestError naming it and ``where`` (the manifest file).
    """
    config = IndexConfig(
        granularities=list(build_fields["granularities"]),
        prepend_title=build_fields["prepend_title"],
    )
    if "near_duplicates" in build_fields:
        try:
            config.near_duplicates = NearDuplicateConfig(**build_fields["near_duplicates"])
        except (TypeError, ValueError) as error:
            raise ManifestError(
                f"{where}: field config.near_duplicates is not a near-duplicate setting "
                f"({error}); rebuild the index"
            ) from None
    for group in ("encoder", "dense", "bm25"):
        settings = getattr(config, group)
        for name, value in build_fields[group].items():
            if not hasattr(settings, name):
                raise ManifestError(
                    f"{where}: field config.{group}.{name} is not an index setting; "
                    "rebuild the index"
                )
            setattr(settings, name, value)
    return config


def needed_files(directory: Path, granularities: list[Granularity]) -> list[str]:
    """Every file that loading the index in ``directory`` reads, relative to it.

    Each must have a manifest entry: a file without one would be read unchecked.
    """
    needed = [f"corpus/{name}" for name in (SENTENCES_FILE, PARAGRAPHS_FILE, QUESTIONS_FILE)]
    for granularity in granularities:
        unit = granularity.value
        needed += [f"{unit}/{EMBEDDINGS_FILE}", f"{unit}/{DENSE_FILE}"]
        names = list(BM25_FILES)
        if (directory / unit / BM25_DIR / BM25_NONOCCURRENCE_FILE).exists():
            names.append(BM25_NONOCCURRENCE_FILE)
        needed += [f"{unit}/{BM25_DIR}/{name}" for name in names]
    return needed


@dataclass
class StageKeys:
    """What each stage's output of one granularity depends on, as hashes."""

    vectors: str
    """Corpus, granularity, encoder and title prefix: ``embeddings.npy``."""
    dense: str
    """The vectors and the FAISS settings: ``dense.faiss``."""
    bm25: str
    """Corpus, granularity, BM25 settings and title prefix: ``bm25/``."""

    @classmethod
    def of(cls, fingerprint: str, granularity: Granularity, config: IndexConfig) -> StageKeys:
        fields = config.build_fields()
        unit = {"corpus": fingerprint, "granularity": granularity.value}
        texts = {**unit, "prepend_title": config.prepend_title}
        vectors = stable_hash({**texts, "encoder": fields["encoder"]})
        return cls(
            vectors=vectors,
            dense=stable_hash({"vectors": vectors, "dense": fields["dense"]}),
            bm25=stable_hash({**texts, "bm25": fields["bm25"]}),
        )


class _Stages:
    """Seconds spent in each build stage; tells an optional listener as each one starts."""

    def __init__(self, listener: StageListener | None) -> None:
        self.listener = listener
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.listener is not None:
            self.listener(name)
        start = time.perf_counter()
        yield
        self.timings[name] = time.perf_counter() - start


def build_index(
    questions: Iterable[Question],
    config: IndexConfig,
    directory: Path,
    source: dict[str, Any] | None = None,
    on_stage: StageListener | None = None,
) -> Manifest:
    """Build (or reuse, or resume) the index of ``questions`` in ``directory``.

    ``questions`` is read once and may be a generator. ``on_stage`` is called with each
    stage's name as it starts (benchmarks use it to attribute time and memory). A
    ``directory`` that is not a folder (a symlink loop, a broken symlink, a file) raises
    IndexPathError naming the path at fault, before any work.
    """
    directory = Path(directory)
    check_index_path(directory)
    granularities = [Granularity(g) for g in config.granularities]
    started = time.perf_counter()
    stages = _Stages(on_stage)
    near = None
    with stages("corpus"):
        if config.near_duplicates.enabled:
            near = NearDuplicateFilter(config.near_duplicates)
            questions = near.questions(questions)
        corpus = SentenceCorpus.from_questions(questions)
        fingerprint = corpus.fingerprint()
    build_key = stable_hash({"corpus": fingerprint, "config": config.build_fields()})
    reused = _reusable(directory, build_key, config)
    if reused is not None:
        log.info("index at %s is up to date; reusing it", directory)
        return reused
    directory.mkdir(parents=True, exist_ok=True)
    # Whatever happens next, a stale manifest must not vouch for a half-rebuilt directory.
    (directory / MANIFEST_FILE).unlink(missing_ok=True)
    with stages("corpus/save"):
        files = corpus.save(directory / "corpus")
    dimension = 0
    encoder: DenseEncoder | None = None
    for granularity in granularities:
        unit_dir = directory / granularity.value
        unit_dir.mkdir(exist_ok=True)
        keys = StageKeys.of(fingerprint, granularity, config)
        with stages(f"{granularity}/encode"):
            if not _stage_current(unit_dir, EMBEDDINGS_KEY, keys.vectors, EMBEDDINGS_FILE):
                encoder = encoder or DenseEncoder(config.encoder)
                encode_units(corpus, granularity, config, encoder, unit_dir, keys.vectors)
        vectors = VectorFile(unit_dir / EMBEDDINGS_FILE)
        dimension = vectors.shape[1]
        with stages(f"{granularity}/dense_index"):
            if not _stage_current(unit_dir, DENSE_KEY, keys.dense, DENSE_FILE):
                (unit_dir / DENSE_KEY).unlink(missing_ok=True)
                save_dense_index(build_dense_index(vectors, config.dense), unit_dir / DENSE_FILE)
                (unit_dir / DENSE_KEY).write_text(keys.dense)
        with stages(f"{granularity}/bm25_index"):
            if not _stage_current(unit_dir, BM25_KEY, keys.bm25, BM25_DIR):
                build_keyword_index(corpus, granularity, config, unit_dir, keys.bm25)
        files += [unit_dir / EMBEDDINGS_FILE, unit_dir / DENSE_FILE]
        files += sorted(p for p in (unit_dir / BM25_DIR).iterdir() if p.is_file())
    with stages("checksums"):
        described = describe_files(directory, files)
    stages.timings["total"] = time.perf_counter() - started
    manifest = Manifest(
        build_key=build_key,
        config=config.build_fields(),
        corpus={
            "fingerprint": fingerprint,
            "num_sentences": corpus.num_sentences,
            "num_paragraphs": corpus.num_paragraphs,
            "num_questions": corpus.num_questions,
            "source": source or {},
            **({"near_duplicates": near.report()} if near is not None else {}),
        },
        dimension=dimension,
        files=described,
        versions=library_versions(),
        timings=stages.timings,
    )
    manifest.write(directory)
    return manifest


def build_keyword_index(
    corpus: SentenceCorpus, granularity: Granularity, config: IndexConfig, unit_dir: Path, key: str
) -> Path:
    """Build the bm25s index of every unit into ``unit_dir/bm25``, texts streamed in batches."""
    (unit_dir / BM25_KEY).unlink(missing_ok=True)
    texts = corpus.unit_texts(granularity, config.prepend_title, batch_size=config.shard_size)
    keyword = KeywordIndex.build(texts, config.bm25)
    output, tmp = unit_dir / BM25_DIR, unit_dir / (BM25_DIR + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    keyword.save(tmp)
    shutil.rmtree(output, ignore_errors=True)
    os.replace(tmp, output)
    (unit_dir / BM25_KEY).write_text(key)
    return output


def encode_units(
    corpus: SentenceCorpus,
    granularity: Granularity,
    config: IndexConfig,
    encoder: DenseEncoder,
    unit_dir: Path,
    embeddings_key: str,
) -> Path:
    """Encode every unit into ``unit_dir/embeddings.npy``, one resumable shard at a time.

    A shard finished by an earlier, interrupted run (its file and checksum both written) is
    not encoded again. Shards are checked (size, shape, checksum) before they are used; one
    that fails raises IndexCorruptError naming it.
    """
    (unit_dir / EMBEDDINGS_KEY).unlink(missing_ok=True)
    shard_dir = unit_dir / SHARD_DIR
    key_file = shard_dir / "key"
    if shard_dir.exists() and (not key_file.exists() or key_file.read_text() != embeddings_key):
        shutil.rmtree(shard_dir)  # shards of another corpus or encoder: useless here
    shard_dir.mkdir(parents=True, exist_ok=True)
    key_file.write_text(embeddings_key)
    total = corpus.num_units(granularity)
    shards: list[tuple[Path, int]] = []
    texts = corpus.unit_texts(granularity, config.prepend_title, batch_size=config.shard_size)
    with tqdm(total=total, desc=f"encode {granularity}s", unit="text") as progress:
        for number, shard_texts in enumerate(texts):
            path = shard_dir / f"{number:05d}.npy"
            shards.append((path, len(shard_texts)))
            if path.exists() and _checksum_path(path).exists():
                # A truncated shard fails now, not after the remaining shards are encoded.
                shard = VectorFile(path)
                _check_shard(path, shard.shape, shard.dtype, len(shard_texts), encoder.dimension)
                progress.update(len(shard_texts))
                continue
            _save_shard(path, _encode_sorted(encoder, shard_texts, progress))
    output = unit_dir / EMBEDDINGS_FILE
    _merge_shards(shards, encoder.dimension, output)
    (unit_dir / EMBEDDINGS_KEY).write_text(embeddings_key)
    shutil.rmtree(shard_dir)
    return output


def _encode_sorted(encoder: DenseEncoder, texts: list[str], progress: tqdm) -> np.ndarray:
    """[len(texts), dim] vectors, encoded shortest first: batches of similar length pad less."""
    order = np.argsort([len(text) for text in texts], kind="stable")
    vectors = np.empty((len(texts), encoder.dimension), dtype=np.float32)
    step = encoder.config.batch_size
    for start in range(0, len(texts), step):
        rows = order[start : start + step]
        vectors[rows] = encoder.encode_documents([texts[i] for i in rows])
        progress.update(len(rows))
    return vectors


def _checksum_path(shard: Path) -> Path:
    return shard.with_name(shard.name + ".sha256")


def _save_shard(path: Path, vectors: np.ndarray) -> None:
    """Write a shard atomically, then its checksum: a shard counts as done once both exist."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as handle:
        np.save(handle, vectors)
    os.replace(tmp, path)
    checksum = _checksum_path(path)
    tmp = checksum.with_name(checksum.name + ".tmp")
    tmp.write_text(file_sha256(path))
    os.replace(tmp, checksum)


def _merge_shards(shards: list[tuple[Path, int]], dim: int, output: Path) -> None:
    """Append the shards' rows to one ``.npy`` file, one shard in memory at a time."""
    total = sum(rows for _, rows in shards)
    tmp = output.with_name(output.name + ".tmp")
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32))}
    header |= {"fortran_order": False, "shape": (total, dim)}
    with tmp.open("wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        for path, rows in shards:
            _read_shard(path, rows, dim).tofile(handle)
    os.replace(tmp, output)


def _read_shard(path: Path, rows: int, dim: int) -> np.ndarray:
    """A shard's [rows, dim] float32 vectors, after checking its checksum, shape and type."""
    if file_sha256(path) != _checksum_path(path).read_text().strip():
        raise IndexCorruptError(
            f"encoding shard {path} does not match its checksum (corrupted): delete it "
            "and its .sha256 file, then run the build again to encode that shard anew"
        )
    vectors = VectorFile(path)
    _check_shard(path, vectors.shape, vectors.dtype, rows, dim)
    return vectors[0:rows]


def _check_shard(path: Path, shape: tuple, dtype: np.dtype, rows: int, dim: int) -> None:
    if tuple(shape) != (rows, dim) or dtype != np.float32:
        raise IndexCorruptError(
            f"encoding shard {path} holds {dtype} {tuple(shape)}, expected float32 "
            f"{(rows, dim)}: delete it and its .sha256 file, then run the build again"
        )


def _stage_current(unit_dir: Path, key_name: str, key: str, output: str) -> bool:
    """Whether a stage's output exists and was built from the inputs that ``key`` names."""
    key_file = unit_dir / key_name
    return (unit_dir / output).exists() and key_file.exists() and key_file.read_text() == key


def _reusable(directory: Path, build_key: str, config: IndexConfig) -> Manifest | None:
    """The manifest of a complete, intact build of ``build_key`` in ``directory``, or None.

    When the directory holds a complete build whose files no longer match their checksums,
    its stage keys are removed too: no stage output of that directory is trusted again.
    """
    try:
        manifest = Manifest.read(directory)
    except IndexMissingError:
        return None
    except IndexDirectoryError as error:
        log.warning("rebuilding %s: %s", directory, error)
        _forget_stages(directory)
        return None
    try:
        granularities = [Granularity(g) for g in manifest.config["granularities"]]
        manifest.require_files(directory, needed_files(directory, granularities))
        manifest.verify_files(directory, checksums=config.checksums())
    except IndexDirectoryError as error:
        log.warning("rebuilding %s from scratch: %s", directory, error)
        _forget_stages(directory)
        return None
    return manifest if manifest.build_key == build_key else None


def _forget_stages(directory: Path) -> None:
    for key_name in STAGE_KEYS:
        for key_file in directory.glob(f"*/{key_name}"):
            key_file.unlink()
