"""The streamed BM25 build against bm25s's own in-memory build, on real dev sentences."""

from __future__ import annotations

import json

import bm25s
import numpy as np
import pytest
import scipy.sparse as sp

from grasp.corpus.bm25 import BM25Config, KeywordIndex, StreamingBM25, _make_stemmer
from grasp.paths import REPO_ROOT


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """~3,000 real "title: sentence" texts, plus an empty one and one made of stopwords."""
    texts = []
    with (REPO_ROOT / "data" / "hotpotqa" / "dev.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            for paragraph in json.loads(line)["paragraphs"]:
                texts += [f"{paragraph['title']}: {s}" for s in paragraph["sentences"]]
            if len(texts) >= 3_000:
                break
    return [*texts, "", "the and of it", "Ünïcode Straße 1961 x"]


def in_memory(texts: list[str], config: BM25Config) -> bm25s.BM25:
    """bm25s's own way: tokenize every text at once, then index."""
    tokens = bm25s.tokenize(
        texts,
        stopwords=config.stopwords or None,
        stemmer=_make_stemmer(config.stemmer),
        show_progress=False,
    )
    retriever = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
    retriever.index(tokens, show_progress=False)
    return retriever


def by_term(retriever: bm25s.BM25) -> tuple[list[str], sp.csc_matrix]:
    """The terms in sorted order and the [docs, terms] score matrix with columns in that order."""
    scores = retriever.scores
    num_terms = len(scores["indptr"]) - 1
    matrix = sp.csc_matrix(
        (scores["data"], scores["indices"], scores["indptr"]),
        shape=(scores["num_docs"], num_terms),
    )
    terms = sorted(term for term in retriever.vocab_dict if term)
    return terms, matrix[:, [retriever.vocab_dict[t] for t in terms]]


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
@pytest.mark.parametrize("stemmer", ["english", ""])
def test_streamed_index_equals_bm25s_in_memory(texts, method, stemmer):
    config = BM25Config(method=method, stemmer=stemmer)
    reference = in_memory(texts, config)
    batches = [texts[i : i + 701] for i in range(0, len(texts), 701)]
    streamed = KeywordIndex.build(batches, config).retriever
    reference_terms, reference_matrix = by_term(reference)
    streamed_terms, streamed_matrix = by_term(streamed)
    assert streamed_terms == reference_terms
    assert streamed.scores["num_docs"] == reference.scores["num_docs"] == len(texts)
    np.testing.assert_array_equal(streamed_matrix.indptr, reference_matrix.indptr)
    np.testing.assert_array_equal(streamed_matrix.indices, reference_matrix.indices)
    np.testing.assert_array_equal(streamed_matrix.data, reference_matrix.data)  # bit for bit
    assert streamed.vocab_dict[""] == len(streamed_terms)  # the empty token after the last term
    if method in ("bm25l", "bm25+"):
        np.testing.assert_array_equal(
            streamed.nonoccurrence_array[[streamed.vocab_dict[t] for t in streamed_terms]],
            reference.nonoccurrence_array[[reference.vocab_dict[t] for t in reference_terms]],
        )
    else:
        assert streamed.nonoccurrence_array is None


def test_streamed_search_equals_bm25s_search(texts):
    config = BM25Config()
    streamed = KeywordIndex.build([texts], config)
    reference = KeywordIndex(in_memory(texts, config), config)
    queries = ["Who directed the film?", "largest city of Poland", "1961 Straße", "zzzq"]
    streamed_ids, streamed_scores = streamed.search(queries, k=10)
    reference_ids, reference_scores = reference.search(queries, k=10)
    np.testing.assert_array_equal(streamed_ids, reference_ids)
    np.testing.assert_array_equal(streamed_scores, reference_scores)
    assert (streamed_ids[3] == -1).all()  # no known term: nothing retrieved
    unit_ids = np.arange(0, len(texts), 7)
    np.testing.assert_array_equal(
        streamed.score_units(queries[1], unit_ids), reference.score_units(queries[1], unit_ids)
    )


@pytest.mark.parametrize("batch_size", [1, 5, 100_000])
def test_batch_size_does_not_change_the_index(texts, batch_size):
    sample = texts[:400]
    one = StreamingBM25(BM25Config())
    one.add(sample)
    whole = one.finish()
    batched = KeywordIndex.build(
        [sample[i : i + batch_size] for i in range(0, len(sample), batch_size)], BM25Config()
    ).retriever
    assert batched.vocab_dict == whole.vocab_dict  # terms numbered by first appearance
    for name in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(batched.scores[name], whole.scores[name])


def test_empty_batches_and_termless_texts_keep_their_unit_ids(texts):
    sample = texts[:50]
    index = KeywordIndex.build([[], ["", "the of"], [], sample], BM25Config())
    assert index.num_units == 52
    ids, _ = index.search([sample[3]], k=1)
    assert ids[0, 0] == 2 + 3  # the two termless texts still hold ids 0 and 1
