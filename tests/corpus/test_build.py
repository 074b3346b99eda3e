"""The streaming build: equal to a one-shard build, resumable mid-shard, corrupt shards named,
stages reused, and the fp16 and PQ storages measured against exact search on real sentences."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import faiss
import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from grasp.config import (
    BuildIndexConfig,
    DatasetConfig,
    dataset_path,
    register_configs,
    to_dataclass,
)
from grasp.corpus import (
    CorpusIndex,
    DenseIndexConfig,
    IndexConfig,
    IndexCorruptError,
    build_index,
    synthetic,
)
from grasp.corpus import build as build_module
from grasp.corpus.build import DENSE_FILE, EMBEDDINGS_FILE, SHARD_DIR
from grasp.corpus.dense import VectorFile, build_dense_index, flat_vectors, load_dense_index
from grasp.paths import REPO_ROOT
from grasp.types import Granularity, Retriever

register_configs()
REAL_SENTENCES = 600


def sentence_config(**fields) -> IndexConfig:
    return IndexConfig(granularities=["sentence"], **fields)


def float32_config(**fields) -> IndexConfig:
    """Float32 weights: batches of other lengths change the vectors by ~1e-7, not bf16's ~1e-2."""
    config = sentence_config(**fields)
    config.encoder = replace(config.encoder, dtype="float32")
    return config


def top_ids(index: faiss.Index, queries: np.ndarray, k: int = 10) -> np.ndarray:
    return index.search(queries, k)[1]


def recall_at_k(approx: np.ndarray, exact: np.ndarray) -> float:
    return float(
        np.mean([len(set(a) & set(e)) / len(e) for a, e in zip(approx, exact, strict=True)])
    )


# ---------------------------------------------------------------------- streaming = in memory


def test_streamed_build_equals_a_one_shard_build(tiny_questions, tmp_path):
    streamed = build_index(tiny_questions, float32_config(shard_size=4), tmp_path / "streamed")
    whole = build_index(tiny_questions, float32_config(shard_size=10_000), tmp_path / "whole")
    assert streamed.corpus == whole.corpus  # same fingerprint, so the same sentence ids
    assert streamed.files["corpus/sentences.parquet"] == whole.files["corpus/sentences.parquet"]
    for name in ("data.csc.index.npy", "indices.csc.index.npy", "vocab.index.json"):
        assert streamed.files[f"sentence/bm25/{name}"] == whole.files[f"sentence/bm25/{name}"]
    vectors = [np.load(tmp_path / d / "sentence" / EMBEDDINGS_FILE) for d in ("streamed", "whole")]
    assert vectors[0].shape == (18, 384)
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-5)
    indexes = [CorpusIndex.load(tmp_path / d) for d in ("streamed", "whole")]
    queries = ["Who discovered radium?", "largest city in New Zealand", "Dutch programmer"]
    for retriever in (Retriever.DENSE, Retriever.BM25):
        ours, theirs = (index.search(queries, retriever, k=5) for index in indexes)
        assert [[h.sentence_id for h in hits] for hits in ours] == [
            [h.sentence_id for h in hits] for hits in theirs
        ]


@pytest.mark.parametrize("factory", ["Flat", "SQfp16", "PQ8x4"])
def test_faiss_index_from_disk_block_by_block_equals_one_from_memory(tiny_index_dir, factory):
    path = tiny_index_dir / "sentence" / EMBEDDINGS_FILE
    config = DenseIndexConfig(factory=factory)
    from_disk = build_dense_index(VectorFile(path), config, add_batch=5)
    in_memory = build_dense_index(np.load(path), config)
    assert from_disk.ntotal == in_memory.ntotal == 18
    np.testing.assert_array_equal(
        faiss.serialize_index(from_disk), faiss.serialize_index(in_memory)
    )


def test_vector_file_reads_rows_like_numpy(tiny_index_dir):
    path = tiny_index_dir / "sentence" / EMBEDDINGS_FILE
    vectors, array = VectorFile(path), np.load(path)
    assert vectors.shape == array.shape and len(vectors) == 18
    np.testing.assert_array_equal(vectors[3:11], array[3:11])
    np.testing.assert_array_equal(vectors[np.array([0, 4, 17])], array[[0, 4, 17]])
    np.testing.assert_array_equal(vectors[15:100], array[15:])


@pytest.mark.parametrize(
    ("damage", "message"),
    [("truncate", "truncated"), ("header", "not a .npy matrix"), ("shape", "expected a C-order")],
)
def test_a_damaged_vector_file_is_named(tiny_index_dir, tmp_path, damage, message):
    path = tmp_path / EMBEDDINGS_FILE
    shutil.copy(tiny_index_dir / "sentence" / EMBEDDINGS_FILE, path)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-100])
    elif damage == "header":
        path.write_bytes(b"garbage" + path.read_bytes()[7:])
    else:
        np.save(path, np.zeros((2, 3, 4), dtype=np.float32))
    with pytest.raises(IndexCorruptError, match=rf"{re.escape(str(path))}.*{message}"):
        VectorFile(path)


# ---------------------------------------------------------------------- resume and corruption


class Interruption:
    """Makes the ``call``-th encode_documents call raise, once; logs the texts encoded."""

    def __init__(self, monkeypatch, call: int) -> None:
        self.calls_left = call
        self.encoded: list[str] = []
        real_encode = build_module.DenseEncoder.encode_documents

        def encode(encoder, texts):
            self.calls_left -= 1
            if self.calls_left == 0:
                raise KeyboardInterrupt  # as if the user pressed Ctrl-C
            self.encoded += texts
            return real_encode(encoder, texts)

        monkeypatch.setattr(build_module.DenseEncoder, "encode_documents", encode)


def test_resume_in_the_middle_of_a_shard_repeats_only_that_shard(
    tiny_questions, tmp_path, monkeypatch
):
    config = float32_config(shard_size=6)  # 18 sentences: shards of 6
    config.encoder = replace(config.encoder, batch_size=2)  # three encode calls per shard
    clean = build_index(tiny_questions, config, tmp_path / "clean")
    corpus = CorpusIndex.load(tmp_path / "clean").corpus
    texts = [t for batch in corpus.unit_texts(Granularity.SENTENCE, True) for t in batch]
    interruption = Interruption(monkeypatch, call=5)  # the second batch of the second shard
    with pytest.raises(KeyboardInterrupt):
        build_index(tiny_questions, config, tmp_path / "index")
    shard_dir = tmp_path / "index" / "sentence" / SHARD_DIR
    assert sorted(p.name for p in shard_dir.glob("*.npy")) == ["00000.npy"]
    before = interruption.encoded
    assert len(before) == 8  # shard 0, then the first batch of shard 1 (shortest first)
    assert set(before[:6]) == set(texts[:6]) and set(before[6:]) <= set(texts[6:12])
    interruption.encoded = []
    resumed = build_index(tiny_questions, config, tmp_path / "index")
    after = interruption.encoded
    assert sorted(after) == sorted(texts[6:])  # shard 0 is not encoded again, nothing is lost
    assert len(after) == len(set(after)) == 12
    assert resumed.corpus == clean.corpus
    np.testing.assert_allclose(
        np.load(tmp_path / "index" / "sentence" / EMBEDDINGS_FILE),
        np.load(tmp_path / "clean" / "sentence" / EMBEDDINGS_FILE),
        atol=1e-6,
    )
    assert not shard_dir.exists()


@pytest.mark.parametrize(
    ("damage", "message"), [("flip", "checksum"), ("truncate", "truncated"), ("rows", "expected")]
)
def test_a_corrupt_shard_is_named(tiny_questions, tmp_path, monkeypatch, damage, message):
    config = sentence_config(shard_size=5)
    Interruption(monkeypatch, call=3)  # shards 0 and 1 of 4 are done
    with pytest.raises(KeyboardInterrupt):
        build_index(tiny_questions, config, tmp_path)
    shard = tmp_path / "sentence" / SHARD_DIR / "00001.npy"
    data = bytearray(shard.read_bytes())
    if damage == "flip":
        data[-7] ^= 0xFF
        shard.write_bytes(bytes(data))
    elif damage == "truncate":
        shard.write_bytes(bytes(data[:-64]))
    else:  # a well-formed file with the wrong rows (e.g. copied from another build)
        np.save(shard, np.zeros((3, 384), dtype=np.float32))
    with pytest.raises(IndexCorruptError, match=rf"{re.escape(str(shard))}.*{message}"):
        build_index(tiny_questions, config, tmp_path)


def test_a_corrupted_complete_build_is_rebuilt_from_scratch(
    tiny_questions, tiny_index_dir, tmp_path
):
    directory = tmp_path / "index"
    shutil.copytree(tiny_index_dir, directory)
    path = directory / "sentence" / EMBEDDINGS_FILE
    original = np.load(path)
    data = bytearray(path.read_bytes())
    data[-9] ^= 0xFF
    path.write_bytes(bytes(data))
    build_index(tiny_questions, IndexConfig(), directory)
    np.testing.assert_allclose(np.load(path), original, atol=2e-2)  # encoded again
    CorpusIndex.load(directory)  # and its checksums hold


# ---------------------------------------------------------------------- stages


def test_stages_are_reported_in_order(tiny_questions, tmp_path):
    stages: list[str] = []
    manifest = build_index(tiny_questions, IndexConfig(), tmp_path, on_stage=stages.append)
    per_unit = ["encode", "dense_index", "bm25_index"]
    assert stages == [
        "corpus",
        "corpus/save",
        *[f"sentence/{s}" for s in per_unit],
        *[f"paragraph/{s}" for s in per_unit],
        "checksums",
    ]
    assert set(manifest.timings) == {*stages, "total"}


def test_changing_the_storage_rebuilds_only_the_faiss_index(
    tiny_questions, tiny_index_dir, tmp_path, monkeypatch
):
    directory = tmp_path / "index"
    shutil.copytree(tiny_index_dir, directory)
    vectors = (directory / "sentence" / EMBEDDINGS_FILE).read_bytes()

    def fail(*args, **kwargs):
        raise AssertionError("the vectors and the BM25 index must be reused")

    monkeypatch.setattr(build_module, "encode_units", fail)
    monkeypatch.setattr(build_module.KeywordIndex, "build", fail)
    config = IndexConfig()
    config.dense = replace(config.dense, factory="SQfp16")
    manifest = build_index(tiny_questions, config, directory)
    assert manifest.config["dense"]["factory"] == "SQfp16"
    assert (directory / "sentence" / EMBEDDINGS_FILE).read_bytes() == vectors
    index = CorpusIndex.load(directory, config)
    dense = load_dense_index(directory / "sentence" / DENSE_FILE)
    assert isinstance(faiss.downcast_index(dense), faiss.IndexScalarQuantizer)
    (hits,) = index.search(["Who discovered polonium?"], Retriever.DENSE, k=1)
    assert hits[0].title == "Marie Curie"


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("IVF1024,PQ48", r"dense.factory='IVF1024,PQ48' could not be trained on 18 vectors"),
        ("Flatt", r"dense.factory='Flatt' is not a FAISS index"),
    ],
)
def test_an_unusable_factory_names_the_field(
    tiny_questions, tiny_index_dir, tmp_path, factory, message
):
    directory = tmp_path / "index"
    shutil.copytree(tiny_index_dir, directory)
    config = IndexConfig()
    config.dense = replace(config.dense, factory=factory)
    with pytest.raises(ValueError, match=message):
        build_index(tiny_questions, config, directory)


# ---------------------------------------------------------------------- storages on real text


@pytest.fixture(scope="module")
def real_flat(tmp_path_factory) -> tuple[Path, list, list[str]]:
    """An exact index over 600 real dev sentences, its questions and 50 real queries."""
    pool = synthetic.load_real_pool([dataset_path(DatasetConfig(name="hotpotqa"), "dev")], seed=0)
    questions = list(
        synthetic.as_questions(synthetic.corpus_paragraphs(pool, REAL_SENTENCES, seed=0))
    )
    directory = tmp_path_factory.mktemp("real-flat")
    build_index(questions, sentence_config(), directory)
    return directory, questions, pool.questions[:50]


def storage_config(name: str) -> IndexConfig:
    """configs/index/<name>.yaml as build_index.py composes it, sentences only."""
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        cfg = compose("build_index", overrides=[f"index={name}", "index.granularities=[sentence]"])
    return to_dataclass(cfg, BuildIndexConfig).index


def build_storage(real_flat, name: str, tmp_path: Path) -> tuple[CorpusIndex, np.ndarray]:
    """Build configs/index/<name>.yaml beside the exact index; recall@10 needs both."""
    directory, questions, queries = real_flat
    shutil.copytree(directory, tmp_path / name)
    config = storage_config(name)
    build_index(questions, config, tmp_path / name)
    index = CorpusIndex.load(tmp_path / name, config)
    return index, index.encoder.encode_queries(queries)


def test_fp16_storage_finds_what_exact_search_finds(real_flat, tmp_path):
    index, query_vectors = build_storage(real_flat, "minilm_fp16", tmp_path)
    assert index.config.dense.factory == "SQfp16"
    exact = load_dense_index(real_flat[0] / "sentence" / DENSE_FILE)
    fp16 = index._dense[Granularity.SENTENCE]
    assert recall_at_k(top_ids(fp16, query_vectors), top_ids(exact, query_vectors)) >= 0.99
    fp16_bytes = (tmp_path / "minilm_fp16" / "sentence" / DENSE_FILE).stat().st_size
    exact_bytes = (real_flat[0] / "sentence" / DENSE_FILE).stat().st_size
    assert fp16_bytes < 0.51 * exact_bytes
    assert flat_vectors(exact).shape == (REAL_SENTENCES, 384)


def test_pq_storage_builds_and_searches(real_flat, tmp_path):
    index, query_vectors = build_storage(real_flat, "minilm_pq", tmp_path)
    dense = faiss.downcast_index(index._dense[Granularity.SENTENCE])
    assert isinstance(dense, faiss.IndexPQ) and dense.pq.M == 48 and dense.pq.nbits == 8
    assert dense.ntotal == REAL_SENTENCES and dense.pq.code_size == 48
    exact = load_dense_index(real_flat[0] / "sentence" / DENSE_FILE)
    recall = recall_at_k(top_ids(dense, query_vectors), top_ids(exact, query_vectors))
    assert 0.5 <= recall <= 1.0  # lossy, yet far above chance (10 of 600)
    hits = index.search(
        ["Who wrote the novel?", "When was the city founded?"], Retriever.DENSE, k=5
    )
    assert [len(h) for h in hits] == [5, 5]
    # Scoped search reads the exact vectors from embeddings.npy, not the PQ codes.
    scope = index.corpus.question_scope(index.corpus.question_ids[0].as_py())
    (scoped,) = index.search(["a question"], Retriever.DENSE, k=3, scopes=[scope])
    assert {h.paragraph_id for h in scoped} <= set(scope.tolist())
