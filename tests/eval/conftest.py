"""Fixtures of the evaluation tests: hand-built trajectories, and the evaluation protocol
(``grasp.eval.protocol``, the work of scripts/evaluate.py) over the tiny questions written as
three datasets' dev files (the loopback judge server,
``judge_server``, is in tests/conftest.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from evaluate_fixture import DATASETS

from grasp.data import write_normalized
from grasp.env.episode import TurnRecord
from grasp.reward import compute_reward
from grasp.rollout.trajectory import Trajectory
from grasp.types import DatasetName, EpisodeEvidence, StopReason, SupportingFact


def make_trajectory(
    episode_id: str,
    answer: str | None,
    gold_answers: tuple[str, ...],
    gold: set[int],
    semantic: set[int] = frozenset(),
    keyword: set[int] = frozenset(),
    read: set[int] = frozenset(),
    turns: list[TurnRecord] | None = None,
    tool_calls: dict[str, int] | None = None,
    errors: dict[str, int] | None = None,
    stop_reason: str = "answered",
    dataset: str = "hotpotqa",
) -> Trajectory:
    """A finished episode with the given evidence; its reward is computed for real."""
    turns = turns or [TurnRecord(text="")]
    errors = errors or {}
    evidence = EpisodeEvidence(
        answer=answer,
        gold_answers=gold_answers,
        gold_paragraph_ids=frozenset(gold),
        evidence_ids={
            "semantic": frozenset(semantic),
            "keyword": frozenset(keyword),
            "read": frozenset(read),
        },
        turns_used=len(turns),
        turn_budget=6,
        invalid_turns=sum(errors.values()),
    )
    question_id = episode_id.split("#")[0]
    return Trajectory(
        episode_id=episode_id,
        question_id=question_id,
        dataset=dataset,
        group_id=0,
        sample_index=0,
        question=f"question {question_id}?",
        gold_answers=list(gold_answers),
        gold_paragraph_ids=sorted(gold),
        turns=turns,
        stop_reason=StopReason(stop_reason),
        answer=answer,
        turns_used=len(turns),
        turn_budget=6,
        evidence_ids={
            "semantic": sorted(semantic),
            "keyword": sorted(keyword),
            "read": sorted(read),
        },
        tool_calls=tool_calls or {},
        errors=errors,
        reward=compute_reward(evidence),
    )


@pytest.fixture
def trajectory():
    """``make_trajectory``: build a finished episode by hand."""
    return make_trajectory


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory, tiny_questions) -> Path:
    """<dir>/<dataset>/dev.jsonl for the three datasets; 2Wiki's copy has sentence facts."""
    root = tmp_path_factory.mktemp("data")
    for name in DATASETS:
        questions = []
        for q in tiny_questions:
            facts = q.supporting_facts
            if name == "2wikimultihopqa":  # the sentences that answer each question
                facts = tuple(SupportingFact(f.title, f.paragraph_index, 1) for f in facts)
            questions.append(
                dataclasses.replace(
                    q,
                    question_id=f"{name}-{q.question_id}",
                    dataset=DatasetName(name),
                    supporting_facts=facts,
                )
            )
        write_normalized(questions, root / name / "dev.jsonl")
    return root


@pytest.fixture(scope="session")
def index_root(tmp_path_factory) -> Path:
    """Where the evaluations build (and then reuse) each dataset's index."""
    return tmp_path_factory.mktemp("indexes")


@pytest.fixture(scope="session")
def scripted(data_dir, index_root) -> list[str]:
    """The overrides of a scripted-policy evaluation of the fixture datasets."""
    return ["policy=scripted", f"data_dir={data_dir}", f"index_root={index_root}"]
