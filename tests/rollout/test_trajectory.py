"""Trajectories: typed in memory, flat on disk, and one definition of the reward's evidence."""

from __future__ import annotations

import json

import pytest

from grasp.compressed import read_text
from grasp.env.environment import EnvConfig, FinalMessagePolicy, RetrievalEnvironment
from grasp.env.episode import INVALID_CALL, TurnRecord
from grasp.paths import REPO_ROOT
from grasp.reward import RewardBreakdown, compute_reward
from grasp.rollout.scripted import tool_call_text
from grasp.rollout.trajectory import Trajectory, read_trajectories, write_trajectories
from grasp.types import ParseErrorKind, RefusalKind, StopReason


def _finished(tiny_index, tiny_questions) -> Trajectory:
    """A keyword search, a parse error, a refused read, then the answer."""
    config = EnvConfig(turn_budget=5, top_k=2, final_message=FinalMessagePolicy.ERROR)
    env = RetrievalEnvironment(tiny_index, config)
    episode = env.reset(tiny_questions[0])
    for text in (
        tool_call_text("keyword_search", query="capital of Poland"),
        "no call",
        tool_call_text("read_paragraph", paragraph_id=999_999),
        tool_call_text("answer", answer="Warsaw"),
    ):
        env.step([episode], [text])
    return Trajectory.from_episode(episode, compute_reward(episode.evidence()), None)


def test_the_trajectory_and_its_episode_give_the_same_evidence(tiny_index, tiny_questions):
    trajectory = _finished(tiny_index, tiny_questions)
    assert [turn.error for turn in trajectory.turns] == [None, "no_tool_call", INVALID_CALL, None]
    evidence = trajectory.evidence()
    assert evidence.invalid_turns == 2 and evidence.turns_used == 4
    assert compute_reward(evidence) == trajectory.reward
    read_back = Trajectory.from_json(json.loads(json.dumps(trajectory.to_json())))
    assert read_back.evidence() == evidence


def test_fields_are_typed_in_memory_and_flat_on_disk(tiny_index, tiny_questions, tmp_path):
    trajectory = _finished(tiny_index, tiny_questions)
    assert trajectory.stop_reason is StopReason.ANSWERED
    assert isinstance(trajectory.reward, RewardBreakdown)
    assert all(isinstance(turn, TurnRecord) for turn in trajectory.turns)
    data = trajectory.to_json()
    assert data["stop_reason"] == "answered" and type(data["stop_reason"]) is str
    # The sparse terms are stored where they are paid: R_G (the search found gold), not R_N
    # (it answered) nor R_C (no search beyond the free ones).
    assert trajectory.reward["R_G"] > 0 and trajectory.reward["R_C"] == 0.0
    assert list(data["reward"]) == [
        "reward/R_A",
        "reward/R_R",
        "reward/R_S",
        "reward/R_E",
        "reward/R_F",
        "reward/R_G",
        "reward/total",
        "answer/em",
        "answer/f1",
    ]
    assert list(data["turns"][0]) == ["text", "call", "error", "observation", "hits"]
    [read_back] = read_trajectories(write_trajectories([trajectory], tmp_path / "t.jsonl"))
    assert read_back == trajectory
    assert read_back.stop_reason is StopReason.ANSWERED


def test_a_reward_without_r_f_reads_back_with_zero():
    terms = {"R_A": 1.0, "R_R": 0.5, "R_S": 1.0, "R_E": 0.25, "R_F": 0.75, "R_N": 0.0}
    terms |= {"R_G": 0.5, "R_C": 0.0}
    flat = RewardBreakdown(terms, 1.6, 1.0, 1.0).as_dict()
    assert RewardBreakdown.from_dict(flat).as_dict() == flat
    del flat["reward/R_F"]
    assert RewardBreakdown.from_dict(flat)["R_F"] == 0.0


def test_turn_errors_are_typed_in_memory_and_plain_strings_on_disk(tiny_index, tiny_questions):
    trajectory = _finished(tiny_index, tiny_questions)
    errors = [turn.error for turn in trajectory.turns]
    assert errors[1] is ParseErrorKind.NO_TOOL_CALL and errors[2] is RefusalKind.INVALID_CALL
    assert trajectory.errors == {ParseErrorKind.NO_TOOL_CALL: 1, RefusalKind.INVALID_CALL: 1}
    data = trajectory.to_json()
    assert [type(turn["error"]) for turn in data["turns"]] == [type(None), str, str, type(None)]
    assert [type(kind) for kind in data["errors"]] == [str, str]
    read_back = Trajectory.from_json(json.loads(json.dumps(data)))
    assert [turn.error for turn in read_back.turns] == errors
    assert read_back.turns[2].error is RefusalKind.INVALID_CALL
    assert [type(kind) for kind in read_back.errors] == [ParseErrorKind, RefusalKind]


def test_a_turn_error_outside_the_closed_set_is_not_a_trajectory(tiny_index, tiny_questions):
    data = _finished(tiny_index, tiny_questions).to_json()
    data["turns"][2]["error"] = "refused_politely"
    with pytest.raises(TypeError, match="refused_politely"):
        Trajectory.from_json(data)


def test_a_committed_trajectories_file_reads_back_and_writes_out_byte_for_byte():
    path = REPO_ROOT / "results" / "cpu_grasp" / "eval_before" / "trajectories.jsonl"
    trajectories = read_trajectories(path)
    kinds = {kind for t in trajectories for kind in t.errors}
    assert RefusalKind.INVALID_CALL in kinds and ParseErrorKind.MALFORMED_JSON in kinds
    written = "".join(json.dumps(t.to_json()) + "\n" for t in trajectories)
    assert written == read_text(path)  # committed as trajectories.jsonl.xz
