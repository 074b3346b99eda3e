"""The streamed BM25 build and the top-k search against bm25s's own, on real dev sentences."""

from __future__ import annotations

import itertools
import json

import bm25s
import numpy as np
import pytest
import scipy.sparse as sp

from grasp.corpus.bm25 import (
    BM25Config,
    KeywordIndex,
    StreamingBM25,
    _make_stemmer,
    top_positive,
)
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


@pytest.fixture(scope="module")
def questions() -> list[str]:
    """200 real dev questions: the first few dozen ask about paragraphs of ``texts``."""
    with (REPO_ROOT / "data" / "hotpotqa" / "dev.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line)["question"] for line in itertools.islice(handle, 200)]


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


EDGE_QUERIES = ["", "the and of it", "zzzq qqzz", "1961 Straße"]
"""Empty, stopwords only, no known term, and a query that matches fewer than 10 texts."""


@pytest.mark.parametrize("k", [1, 10, 100, 3_003])
def test_search_equals_bm25s_retrieve_up_to_the_order_of_ties(texts, questions, k):
    """Scores bit for bit and units wherever scores differ; among equal scores, unit-id order.

    bm25s orders equal scores as its argpartition leaves them, so they are compared as sets,
    and a tie cut by the k-th place keeps the lowest unit ids here.
    """
    config = BM25Config()
    index = KeywordIndex.build([texts], config)
    queries = [*questions, *EDGE_QUERIES]
    ids, scores = index.search(queries, k)
    assert ids.shape == scores.shape == (len(queries), k)
    tokens = index.tokenize_queries(queries)
    reference_ids, reference_scores = index.retriever.retrieve(
        tokens, k=k, show_progress=False, n_threads=0
    )
    np.testing.assert_array_equal(scores, reference_scores.astype(np.float32))  # bit for bit
    groups = {"inside": 0, "cut": 0}
    for row, query_tokens in enumerate(tokens):
        full = index.query_scores(query_tokens)
        matched = scores[row] > 0
        np.testing.assert_array_equal(ids[row, ~matched], -1)
        assert ids[row, matched].tolist() == (
            np.argsort(-full, kind="stable")[: int(matched.sum())].tolist()
        ), "best first, equal scores in unit-id order"
        for value in np.unique(scores[row, matched]):
            ours = ids[row][scores[row] == value]
            theirs = reference_ids[row][reference_scores[row] == value]
            everyone = np.flatnonzero(full == value)
            if len(everyone) == len(ours):
                assert sorted(theirs.tolist()) == ours.tolist()
                groups["inside"] += len(ours) > 1
            else:  # the tie straddles the k-th place: both keep as many, of the same tie
                assert len(theirs) == len(ours) and set(theirs.tolist()) <= set(everyone.tolist())
                assert ours.tolist() == everyone[: len(ours)].tolist()
                groups["cut"] += 1
    assert (ids[-4:-1] == -1).all()  # empty, stopwords only, unknown terms: nothing
    if k >= 10:  # "1961 Straße" matches some texts, fewer than k
        assert 0 < (ids[-1] >= 0).sum() < k
    if k == 10:  # the real questions do exercise both kinds of tie
        assert groups["inside"] > 10 and groups["cut"] > 10, groups


def test_equal_scores_come_in_unit_id_order():
    index = KeywordIndex.build(
        [["alpha beta", "gamma", "alpha beta"], ["alpha beta", "delta alpha beta"]], BM25Config()
    )
    ids, scores = index.search(["alpha", "alpha"], k=2)
    assert ids.tolist() == [[0, 2], [0, 2]]
    assert scores[0, 0] == scores[0, 1] > 0
    ids, scores = index.search(["alpha"], k=5)
    assert ids.tolist() == [[0, 2, 3, 4, -1]]
    assert scores[0, 2] > scores[0, 3] > scores[0, 4] == 0


@pytest.mark.parametrize("query", ["", "the of and", "zzzq"])
def test_a_query_without_known_terms_scores_zero_everywhere(texts, query):
    index = KeywordIndex.build([texts[:100]], BM25Config())
    np.testing.assert_array_equal(index.score_units(query, np.array([0, 5, 99])), [0, 0, 0])
    ids, scores = index.search([query], k=3)
    assert ids.tolist() == [[-1, -1, -1]] and scores.tolist() == [[0, 0, 0]]


def test_an_empty_batch_of_queries_returns_empty_arrays(texts):
    ids, scores = KeywordIndex.build([texts[:10]], BM25Config()).search([], k=4)
    assert ids.shape == scores.shape == (0, 4)


@pytest.mark.parametrize(
    ("scores", "k", "ids"),
    [
        ([0.0, 2.0, 1.0, 2.0, 0.0, 3.0], 2, [5, 1]),
        ([0.0, 2.0, 1.0, 2.0, 0.0, 3.0], 3, [5, 1, 3]),
        ([0.0, 2.0, 1.0, 2.0, 0.0, 3.0], 10, [5, 1, 3, 2]),
        ([1.0, 1.0, 1.0, 1.0], 2, [0, 1]),
        ([0.0, -1.0, 0.0], 2, []),
        ([], 3, []),
    ],
)
def test_top_positive_table(scores, k, ids):
    array = np.asarray(scores, dtype=np.float32)
    units, values = top_positive(array, k)
    assert units.tolist() == ids
    assert values.tolist() == array[ids].tolist()
