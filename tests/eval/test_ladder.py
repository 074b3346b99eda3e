"""The evaluation ladder against hand-computed values: rank metrics of one call, their means
by tool, answer-in-evidence and grounded answers, pooling, and the markdown."""

from __future__ import annotations

import json
from math import log2

import pytest
from evaluate_fixture import compose_config

from grasp.env.episode import TurnRecord
from grasp.eval.context import read_trajectories
from grasp.eval.failures import failure_shares
from grasp.eval.ladder import (
    RankScores,
    answer_in_evidence,
    contains_answer,
    evidence_summary,
    grounded_answer,
    ladder_markdown,
    ladder_section,
    pool_sections,
    rank_scores,
    retrieval_by_tool,
    search_calls,
)
from grasp.eval.protocol import evaluate_datasets
from grasp.eval.results import EvaluationResults

GOLD_3 = {7, 2, 3}
HITS = [5, 9, 5, 7, 2]  # gold at ranks 4 and 5; paragraph 3 never found


@pytest.mark.parametrize(
    "hits,gold,k,expected",
    [
        # precision 2/5, recall 2/3, first gold at rank 4; ideal: 3 gold at ranks 1-3
        (
            HITS,
            GOLD_3,
            None,
            (2 / 3, 0.4, 0.25, (1 / log2(5) + 1 / log2(6)) / (1 + 1 / log2(3) + 0.5)),
        ),
        (HITS, GOLD_3, 4, (1 / 3, 0.25, 0.25, (1 / log2(5)) / (1 + 1 / log2(3) + 0.5))),
        (HITS, GOLD_3, 2, (0.0, 0.0, 0.0, 0.0)),
        ([3, 8], {3}, None, (1.0, 0.5, 1.0, 1.0)),
        ([8, 3], {3}, None, (1.0, 0.5, 0.5, 1 / log2(3))),
        # sentence hits of one paragraph: every hit is relevant, the paragraph gains once
        ([1, 1, 2], {1, 2}, None, (1.0, 1.0, 1.0, (1 + 0.5) / (1 + 1 / log2(3)))),
        # fewer hits than k: precision over the hits there are, the ideal over k
        ([4], {3, 4}, 3, (0.5, 1.0, 1.0, 1 / (1 + 1 / log2(3)))),
        ([4], {3, 4}, None, (0.5, 1.0, 1.0, 1.0)),
        ([], {3}, None, (0.0, 0.0, 0.0, 0.0)),
    ],
)
def test_rank_scores_are_exact(hits, gold, k, expected):
    assert rank_scores(hits, gold, k) == pytest.approx(RankScores(*expected))


def test_rank_scores_refuse_no_gold_and_k_below_one():
    with pytest.raises(ValueError, match="no gold"):
        rank_scores([1], set())
    with pytest.raises(ValueError, match="k must be"):
        rank_scores([1], {1}, k=0)


def _search(tool: str, hits: list[int], error: str | None = None) -> TurnRecord:
    call = {"name": tool, "arguments": {"query": "q"}}
    return TurnRecord(
        text="",
        call=None if error else call,
        error=error,
        observation="",
        hits=[{"sentence_id": None, "paragraph_id": p, "score": 1.0} for p in hits],
    )


ANSWER = TurnRecord(text="", call={"name": "answer", "arguments": {}})


@pytest.fixture
def two(trajectory):
    first = trajectory(
        "a#0",
        "Paris",
        ("Paris",),
        {3, 4},
        semantic={3, 8},
        keyword={4},
        turns=[
            _search("semantic_search", [3, 8]),
            _search("keyword_search", [4]),
            _search("semantic_search", [], error="bad_json"),  # refused: no search ran
            ANSWER,
        ],
    )
    second = trajectory(
        "b#0",
        "Rome",
        ("Paris",),
        {3, 4},
        semantic={9},
        turns=[_search("semantic_search", [9]), ANSWER],
    )
    return [first, second]


def test_search_calls_skip_refused_turns_and_answers(two):
    calls = search_calls(two[0])
    assert [(c.tool, c.hit_paragraph_ids) for c in calls] == [
        ("semantic_search", (3, 8)),
        ("keyword_search", (4,)),
    ]


def test_retrieval_means_over_calls_split_by_tool(two):
    by_tool = retrieval_by_tool(two)
    assert list(by_tool) == ["keyword_search", "semantic_search"]
    # semantic: call [3, 8] (recall 1/2, precision 1/2, MRR 1, nDCG 1/(1+1/log2 3)), call [9] (0s)
    assert by_tool["semantic_search"] == pytest.approx(
        {
            "recall": 0.25,
            "precision": 0.25,
            "mrr": 0.5,
            "ndcg": 0.5 / (1 + 1 / log2(3)),
            "calls": 2,
            "hits_per_call": 1.5,
        }
    )
    assert by_tool["keyword_search"] == pytest.approx(
        {"recall": 0.5, "precision": 1.0, "mrr": 1.0, "ndcg": 1.0, "calls": 1, "hits_per_call": 1.0}
    )
    assert retrieval_by_tool(two, k=1)["semantic_search"]["precision"] == 0.5


def test_questions_without_gold_have_no_retrieval_scores(trajectory):
    t = trajectory("a#0", "x", ("y",), set(), turns=[_search("search", [1]), ANSWER])
    assert retrieval_by_tool([t]) == {}


PARAGRAPHS = {
    3: "The Eiffel Tower is in Paris.",
    4: "Paris is the capital of France.",
    8: "Berlin is the capital of Germany.",
}


@pytest.mark.parametrize(
    "text,answer,expected",
    [
        ("The Eiffel Tower is in Paris.", "paris", True),
        ("The Eiffel Tower is in Paris.", "The Eiffel Tower", True),
        ("Parisian cafes", "Paris", False),  # whole tokens only
        ("The Eiffel Tower is in Paris.", "the", False),  # normalizes to nothing
        ("U.S.A. and more", "usa", True),
    ],
)
def test_contains_answer_matches_normalized_whole_tokens(text, answer, expected):
    assert contains_answer(text, answer) is expected


def test_answer_in_evidence_and_grounded_answer(trajectory):
    lookup = PARAGRAPHS.__getitem__
    seen_by_hit = trajectory("a#0", "Berlin", ("City of Light", "Paris"), {3}, semantic={3})
    assert answer_in_evidence(seen_by_hit, lookup) is True
    assert grounded_answer(seen_by_hit, lookup) is False  # Berlin is in no read paragraph
    read = trajectory("b#0", "Paris", ("Paris",), {4}, read={4})
    assert answer_in_evidence(read, lookup) is True
    assert grounded_answer(read, lookup) is True
    elsewhere = trajectory("c#0", "Berlin", ("Paris",), {3}, keyword={8}, read={8})
    assert answer_in_evidence(elsewhere, lookup) is False
    assert grounded_answer(elsewhere, lookup) is True  # grounded, but wrong
    assert grounded_answer(trajectory("d#0", None, ("Paris",), {3}), lookup) is None
    assert grounded_answer(trajectory("e#0", "The", ("Paris",), {3}), lookup) is None


def test_evidence_summary_rates(trajectory):
    episodes = [
        trajectory("a#0", "Paris", ("Paris",), {3}, semantic={3}, read={3}),
        trajectory("b#0", "Berlin", ("Paris",), {3}, semantic={8}),
        trajectory("c#0", None, ("Paris",), {3}, semantic={4}),
    ]
    assert evidence_summary(episodes, PARAGRAPHS.__getitem__) == {
        "answer_in_evidence": pytest.approx(2 / 3),
        "episodes": 3,
        "grounded_answer": 0.5,
        "answered_episodes": 2,
    }


def test_section_and_pooling_weigh_by_counts(two, trajectory):
    lookup = {**PARAGRAPHS, 9: "Rome."}.__getitem__
    first = ladder_section(two, lookup)
    assert first["episodes"] == 2
    assert first["failures"]["correct"] == 0.5
    assert first["evidence"]["answer_in_evidence"] == 0.5
    other = [
        trajectory(
            f"c{i}#0",
            "Rome",
            ("Paris",),
            {3},
            semantic={3},
            turns=[_search("semantic_search", [3]), ANSWER],
        )
        for i in range(2)
    ]
    second = ladder_section(other, lookup)
    pooled = pool_sections([first, second])
    assert pooled["episodes"] == 4
    # semantic: 2 calls (mean recall 0.25) + 2 calls (recall 1.0)
    assert pooled["retrieval"]["semantic_search"]["recall"] == pytest.approx(0.625)
    assert pooled["retrieval"]["semantic_search"]["calls"] == 4
    assert pooled["retrieval"]["keyword_search"]["calls"] == 1
    assert pooled["failures"]["correct"] == 0.25
    assert pooled["evidence"]["answer_in_evidence"] == 0.75
    assert pooled["evidence"]["grounded_answer"] == pytest.approx(
        first["evidence"]["grounded_answer"] / 2
    )
    assert pool_sections([first, ladder_section(other, None)]).get("evidence") is None


def test_markdown_shows_retrieval_evidence_failures_and_cost(two):
    results = {
        "ladder": ladder_section(two, {**PARAGRAPHS, 9: "Rome."}.__getitem__),
        "generated_tokens_per_episode": "not recorded",
        "turns_per_episode": 3.0,
        "tool_calls_per_episode": {"semantic_search": 1.5},
        "policy_extra": {"backend_calls_per_episode": 2.0},
    }
    markdown = ladder_markdown("hotpotqa", results)
    assert "## Evaluation ladder: hotpotqa" in markdown
    assert "| semantic_search | 2 | 1.5 | 0.250 | 0.250 | 0.500 |" in markdown
    assert "- answer in evidence: 0.500 (2 episodes)" in markdown
    assert "| 0.500 | 0.000 | 0.000 | 0.500 | 0.000 | 0.000 | 0.000 |" in markdown
    assert "| generated tokens / episode | not recorded |" in markdown
    assert "| semantic_search calls / episode | 1.50 |" in markdown
    assert "| backend calls / episode | 2.00 |" in markdown
    assert "| wall s / question | — |" in markdown


def test_an_evaluation_reports_the_ladder_per_dataset_and_pooled(scripted, tmp_path):
    out = tmp_path / "eval"
    overrides = [*scripted, "n=2", "datasets=[hotpotqa,musique]", f"out={out}"]
    results = evaluate_datasets(compose_config(*overrides))
    calls = 0
    for name in ("hotpotqa", "musique"):
        ladder = json.loads((out / name / "results.json").read_text())["ladder"]
        trajectories = read_trajectories(out / name)
        assert ladder == results.datasets[name].ladder
        assert ladder["episodes"] == 2
        assert ladder["failures"] == failure_shares(trajectories)
        assert ladder["evidence"]["episodes"] == 2
        assert ladder["retrieval"] == retrieval_by_tool(trajectories)
        assert ladder["retrieval"]["semantic_search"]["calls"] >= 1  # the scripted agent searches
        calls += ladder["retrieval"]["semantic_search"]["calls"]
        assert f"## Evaluation ladder: {name}" in (out / name / "results.md").read_text()
    pooled = results.overall.pooled.ladder
    assert pooled["episodes"] == 4
    assert pooled["retrieval"]["semantic_search"]["calls"] == calls
    assert sum(pooled["failures"].values()) == pytest.approx(1.0)
    assert "## Evaluation ladder: overall (pooled)" in (out / "results.md").read_text()
    written = json.loads((out / "results.json").read_text())
    assert written["overall"]["pooled"]["ladder"] == pooled
    assert EvaluationResults.from_json(written).to_json() == written
