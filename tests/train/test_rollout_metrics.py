"""``rollout_metrics``: the per-step statistics of a hand-written rollout, value by value."""

from __future__ import annotations

import pytest

from grasp.env.episode import TurnRecord
from grasp.reward import RewardBreakdown
from grasp.rollout.trajectory import Trajectory
from grasp.train.rollout_stats import rollout_metrics
from grasp.types import StopReason, ToolName


def episode(
    group: int,
    sample: int,
    stop: str,
    turns: int,
    total: float,
    tools: dict[str, int] | None = None,
    errors: dict[str, int] | None = None,
    f1: float = 0.0,
    em: float = 0.0,
    generated: int = 0,
    completion: int = 0,
    turns_played: list[TurnRecord] | None = None,
) -> Trajectory:
    reward = {
        "reward/R_A": f1,
        "reward/R_R": 0.0,
        "reward/R_S": 0.0,
        "reward/R_E": 0.0,
        "reward/R_F": 0.0,
        "reward/total": total,
        "answer/em": em,
        "answer/f1": f1,
    }
    return Trajectory(
        episode_id=f"q{group}#{sample}",
        question_id=f"q{group}",
        dataset="hotpotqa",
        group_id=group,
        sample_index=sample,
        question="?",
        gold_answers=["a"],
        gold_paragraph_ids=[1],
        turns=turns_played or [],
        stop_reason=stop,
        answer=None,
        turns_used=turns,
        turn_budget=4,
        evidence_ids={"semantic": [], "keyword": [], "read": []},
        tool_calls=tools or {},
        errors=errors or {},
        reward=RewardBreakdown.from_dict(reward),
        generated_tokens=generated,
        completion_tokens=completion,
    )


# Three groups of two. Group 0 differs in reward; groups 1 (two wrong answers) and 2 (no call,
# a failed backend) do not: 2 of 3 groups have zero spread. 10 turns in all, two of them parse
# errors (malformed JSON, no tool call) and one an invalid call: a read the environment refused.
ROLLOUT = [
    episode(
        0,
        0,
        "answered",
        3,
        1.2,
        {"keyword_search": 2, "answer": 1},
        f1=1.0,
        em=1.0,
        generated=30,
        completion=50,
    ),
    episode(
        0,
        1,
        "turn_budget",
        4,
        0.35,
        {"semantic_search": 1, "read_paragraph": 1},
        {"malformed_json": 1, "invalid_call": 1},
        generated=40,
        completion=90,
        turns_played=[
            TurnRecord(text="", call={"name": "semantic_search", "arguments": {"query": "q"}}),
            TurnRecord(
                text="",
                call={"name": "read_paragraph", "arguments": {"hit": 9}},
                error="invalid_call",
            ),
            TurnRecord(text="{", error="malformed_json"),
            TurnRecord(text=""),
        ],
    ),
    episode(1, 0, "answered", 1, 0.0, {"answer": 1}, generated=5, completion=5),
    episode(1, 1, "answered", 1, 0.0, {"answer": 1}, generated=5, completion=5),
    episode(2, 0, "no_tool_call", 1, 0.0, errors={"no_tool_call": 1}),
    episode(2, 1, "generation_error", 0, 0.0),
]


def test_rollout_metrics_of_a_scripted_rollout():
    assert rollout_metrics(ROLLOUT, group=2) == pytest.approx(
        {
            "answer/em": 1 / 6,
            "answer/f1": 1 / 6,
            "episode/turns": 10 / 6,
            "episode/generated_tokens": 80 / 6,
            "episode/completion_tokens": 150 / 6,
            "tools/parse_error_rate": 2 / 10,
            "tools/invalid_call_rate": 1 / 10,
            "tools/repaired_call_rate": 0.0,
            "groups/zero_reward_spread": 2 / 3,
            "reward/R_A": 1 / 6,
            "reward/R_R": 0.0,
            "reward/R_S": 0.0,
            "reward/R_E": 0.0,
            "reward/R_F": 0.0,
            "reward/R_N": 0.0,
            "reward/R_G": 0.0,
            "reward/R_C": 0.0,
            "reward/total": 1.55 / 6,
            "tools/semantic_search_per_episode": 1 / 6,
            "tools/keyword_search_per_episode": 2 / 6,
            "tools/read_paragraph_per_episode": 1 / 6,
            "tools/search_per_episode": 0.0,
            "tools/answer_per_episode": 3 / 6,
            # Calls that ran and calls refused: the one read was refused.
            "ran/semantic_search_per_episode": 1 / 6,
            "ran/keyword_search_per_episode": 2 / 6,
            "ran/read_paragraph_per_episode": 0.0,
            "ran/search_per_episode": 0.0,
            "ran/answer_per_episode": 3 / 6,
            "refused/semantic_search_per_episode": 0.0,
            "refused/keyword_search_per_episode": 0.0,
            "refused/read_paragraph_per_episode": 1 / 6,
            "refused/search_per_episode": 0.0,
            "refused/answer_per_episode": 0.0,
            "stop/answered": 3 / 6,
            "stop/turn_budget": 1 / 6,
            "stop/token_budget": 0.0,
            "stop/no_tool_call": 1 / 6,
            "stop/generation_error": 1 / 6,
            "stop/wall_clock_budget": 0.0,
        },
        abs=1e-12,
    )


def test_every_tool_and_stop_reason_has_its_key():
    metrics = rollout_metrics(ROLLOUT, group=2)
    assert {f"tools/{t.value}_per_episode" for t in ToolName} <= set(metrics)
    assert {f"stop/{r.value}" for r in StopReason} <= set(metrics)


def test_the_zero_spread_share_counts_groups_not_samples():
    # One group of four whose samples tie except one: it has spread; two groups of two that
    # tie: zero spread. The share depends on how the samples are grouped.
    totals = [1.0, 1.0, 1.0, 0.0]
    flat = [episode(0, i, "answered", 1, total) for i, total in enumerate(totals)]
    assert rollout_metrics(flat, group=4)["groups/zero_reward_spread"] == 0.0
    assert rollout_metrics(flat, group=2)["groups/zero_reward_spread"] == 0.5
