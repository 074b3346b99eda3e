"""The next hop's query probe: the names a read paragraph offers, and what each query finds
in a real index of the tiny corpus."""

from __future__ import annotations

import pytest

from grasp.experiments.bridge_probe import (
    QUERIES,
    RETRIEVERS,
    named_entities,
    next_hop_queries,
    probe,
    table,
)
from grasp.types import Hit, Retriever


@pytest.mark.parametrize(
    ("text", "exclude", "same_as", "names"),
    [
        # "He" leads the sentence; Mount Everest is in the question.
        (
            "He and Tenzing Norgay were the first climbers confirmed to have reached the summit "
            "of Mount Everest in 1953.",
            "In which city was the first climber to reach the summit of Mount Everest born?",
            "",
            ["Tenzing Norgay"],
        ),
        # Joined by "of the", "The" dropped, the month is no name, a name is kept once.
        (
            "The Order of the Belt of Hope was founded in April by King Charles VI of France. "
            "King Charles VI of France died.",
            "",
            "",
            ["Order of the Belt of Hope", "King Charles VI of France"],
        ),
        # A sentence's end splits two names; a longer form of the title is the title again.
        (
            "Sir Edmund Hillary was born in Auckland. New Zealand honoured him.",
            "",
            "Edmund Hillary",
            ["Auckland", "New Zealand"],
        ),
        ("It was first released in 1991.", "", "", []),
    ],
)
def test_the_names_a_paragraph_mentions(text, exclude, same_as, names):
    assert named_entities(text, exclude=exclude, same_as=same_as) == names


def test_the_next_hop_queries_of_a_read_paragraph():
    python = Hit(6, 12, "Python (programming language)", "", 1.0, Retriever.DENSE, 0)
    text = "Python is a high-level programming language created by Guido van Rossum."
    question = "Which company did the creator of the Python programming language work for?"
    queries = next_hop_queries(question, [python], python, text)
    assert queries == {
        "bridge": "Python (programming language) company creator work",
        "entity": "Guido van Rossum",
        "entity_words": "Guido van Rossum company creator work",
        "question_words": "company creator Python programming language work",
    }


def test_the_bridge_entity_finds_the_paragraph_the_title_query_does_not(tiny_index, tiny_questions):
    report = probe(tiny_index, tiny_questions, k=1)
    episodes = {e["question_id"]: e for e in report["episodes"]}
    assert report["questions"] == 3 and report["lacking"] == len(episodes)
    assert all(e["missing"] for e in episodes.values())
    # The Python paragraph names its creator, the question's missing gold paragraph; the
    # warm start's query leads with the read title, and top-1 is that paragraph again.
    python = episodes["q-python"]
    assert python["read"] == "Python (programming language)"
    assert python["missing"] == ["Guido van Rossum"] and python["names_a_missing_title"]
    assert python["found"]["entity"] == {"bm25": True, "dense": True}
    assert python["found"]["bridge"] == {"bm25": False, "dense": False}
    # The totals are the episodes' findings.
    for name in QUERIES:
        found = report["found"][name]
        for retriever in RETRIEVERS:
            assert found[str(retriever)] == sum(
                e["found"][name][str(retriever)] for e in episodes.values()
            )
        assert found["either"] == sum(any(e["found"][name].values()) for e in episodes.values())
    assert report["names_a_missing_title"] == sum(
        e["names_a_missing_title"] for e in episodes.values()
    )
    lines = table(report).splitlines()
    assert lines[4].startswith("| bridge | ") and lines[-1].startswith("| (deeper: the question's")
    assert len(lines) == 5 + len(QUERIES)


def test_reading_deeper_counts_only_the_hits_past_the_first_k(tiny_index, tiny_questions):
    # With k as large as the corpus, the first searches see every paragraph: nothing lacks.
    everything = probe(tiny_index, tiny_questions, k=50)
    assert everything["lacking"] == 0 and everything["deeper"] == {
        "bm25": 0,
        "dense": 0,
        "either": 0,
    }
