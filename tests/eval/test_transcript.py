"""A trajectory printed turn by turn: calls, refusals, observations, answer and reward."""

from __future__ import annotations

from grasp.env.episode import TurnRecord
from grasp.eval.transcript import transcript
from grasp.reward import TERM_NAMES, RewardBreakdown
from grasp.rollout.trajectory import Trajectory
from grasp.types import StopReason


def trajectory() -> Trajectory:
    search = {"name": "semantic_search", "arguments": {"query": "Carondelet Canal opened"}}
    observation = "\n".join(f"{i}. [s{i} p{i}] sentence {i}" for i in range(1, 6))
    return Trajectory(
        episode_id="q1#0",
        question_id="q1",
        dataset="hotpotqa",
        group_id=0,
        sample_index=0,
        question="Which canal began operating first?",
        gold_answers=["Carondelet Canal", "the Carondelet"],
        gold_paragraph_ids=[3, 7],
        turns=[
            TurnRecord(text="...", call=search, observation=observation),
            TurnRecord(
                text='<tool_call>\n{"name": "read_paragraph", "arguments": {"sentence_id": "x"}}',
                error="invalid_argument",
                observation="Error: sentence_id must be an integer id",
            ),
            TurnRecord(
                text="...", call={"name": "answer", "arguments": {"answer": "Carondelet Canal"}}
            ),
        ],
        stop_reason=StopReason.ANSWERED,
        answer="Carondelet Canal",
        turns_used=3,
        turn_budget=5,
        evidence_ids={"semantic": [1, 2, 3, 4, 5], "keyword": [], "read": []},
        tool_calls={"semantic_search": 1, "answer": 1},
        errors={"invalid_argument": 1},
        reward=RewardBreakdown(
            terms=dict.fromkeys(TERM_NAMES, 0.0) | {"R_A": 1.0, "R_E": 0.4},
            total=1.06,
            em=1.0,
            f1=1.0,
        ),
    )


def test_a_transcript_shows_each_turn_its_observation_and_the_reward():
    text = transcript(trajectory(), observation_lines=3)
    assert text.splitlines() == [
        "question (hotpotqa q1): Which canal began operating first?",
        "gold answer: Carondelet Canal | the Carondelet; gold paragraphs: [3, 7]",
        'turn 1: semantic_search {"query": "Carondelet Canal opened"}',
        "    | 1. [s1 p1] sentence 1",
        "    | 2. [s2 p2] sentence 2",
        "    | 3. [s3 p3] sentence 3",
        "    | ... (2 more lines)",
        'turn 2: refused (invalid_argument): <tool_call> {"name": "read_paragraph", '
        '"arguments": {"sentence_id": "x"}}',
        "    | Error: sentence_id must be an integer id",
        'turn 3: answer {"answer": "Carondelet Canal"}',
        "answer: 'Carondelet Canal' (stop: answered, 3 turns)",
        "reward: R_A 1.000  R_R 0.000  R_S 0.000  R_E 0.400  R_F 0.000  R_N 0.000  R_G 0.000  R_C 0.000  total 1.060",
        "EM 1  F1 1.000  read paragraphs: []",
    ]
