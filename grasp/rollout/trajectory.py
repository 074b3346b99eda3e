"""Finished episodes as trajectories: everything a reader, the trainer and the metrics need.

``trajectories.jsonl`` holds one ``Trajectory.to_json()`` per line: the question and its
gold, each turn's text, parsed call (or error) and observation, the stop reason, the
retrieval evidence, the reward breakdown and, optionally, the token ids and mask.

In memory the fields are typed (``TurnRecord``, ``TurnError``, ``StopReason``,
``RewardBreakdown``); only ``to_json`` flattens them (the reward to its ``area/name`` keys),
and ``from_json`` reads them back, so that the file format stays what it has always been.
A finished, committed ``trajectories.jsonl`` is stored as ``trajectories.jsonl.xz``
(``grasp.compressed``); ``read_trajectories`` reads either.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from grasp.compressed import read_text
from grasp.env.episode import Citations, Episode, TurnRecord, episode_evidence
from grasp.reward import RewardBreakdown
from grasp.rollout.chat import TokenTrace
from grasp.types import EpisodeEvidence, StopReason, TurnError, parse_turn_error

TRAJECTORIES_FILE = "trajectories.jsonl"
"""An evaluation's trajectories, one ``Trajectory.to_json()`` per line."""


@dataclass
class Trajectory:
    """One finished episode."""

    episode_id: str
    question_id: str
    dataset: str
    group_id: int
    """The G samples of one question share it."""
    sample_index: int
    question: str
    gold_answers: list[str]
    gold_paragraph_ids: list[int]
    turns: list[TurnRecord]
    stop_reason: StopReason
    answer: str | None
    turns_used: int
    turn_budget: int
    semantic_paragraph_ids: list[int]
    keyword_paragraph_ids: list[int]
    read_paragraph_ids: list[int]
    tool_calls: dict[str, int]
    errors: dict[TurnError, int]
    """Invalid turns by kind (``Episode.errors``)."""
    reward: RewardBreakdown
    """Written as ``RewardBreakdown.as_dict(sparse=True)``: reward/R_A ... reward/total,
    answer/em|f1."""
    generated_tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    """What the policy reported about the episode (a baseline's name, route, backend usage)."""
    citations: Citations | None = None
    """The answer's citations (``env.citations``); None, and absent from the JSON, when the
    episode did not answer with citations on (every trajectory written before they existed)."""
    tokens: TokenTrace | None = field(default=None, repr=False)

    @classmethod
    def from_episode(
        cls, episode: Episode, reward: RewardBreakdown, trace: TokenTrace | None
    ) -> Trajectory:
        if episode.stop_reason is None:
            raise ValueError(f"episode {episode.episode_id} has not stopped")
        return cls(
            episode_id=episode.episode_id,
            question_id=episode.question.question_id,
            dataset=str(episode.question.dataset),
            group_id=episode.group_id,
            sample_index=episode.sample_index,
            question=episode.question.question,
            gold_answers=list(episode.question.answers),
            gold_paragraph_ids=sorted(episode.gold_paragraph_ids),
            turns=list(episode.turns),
            stop_reason=episode.stop_reason,
            answer=episode.answer,
            turns_used=episode.turns_used,
            turn_budget=episode.turn_budget,
            semantic_paragraph_ids=sorted(episode.semantic_paragraph_ids),
            keyword_paragraph_ids=sorted(episode.keyword_paragraph_ids),
            read_paragraph_ids=sorted(episode.read_paragraph_ids),
            tool_calls=dict(episode.tool_calls),
            errors=dict(episode.errors),
            reward=reward,
            generated_tokens=sum(trace.env_mask) if trace else 0,
            prompt_tokens=len(trace.prompt_ids) if trace else 0,
            completion_tokens=len(trace.completion_ids) if trace else 0,
            extra=dict(episode.extra),
            citations=episode.citations,
            tokens=trace,
        )

    def evidence(self) -> EpisodeEvidence:
        """The reward's inputs, rebuilt from what the trajectory recorded."""
        return episode_evidence(
            answer=self.answer,
            gold_answers=self.gold_answers,
            gold_paragraph_ids=self.gold_paragraph_ids,
            semantic_paragraph_ids=self.semantic_paragraph_ids,
            keyword_paragraph_ids=self.keyword_paragraph_ids,
            read_paragraph_ids=self.read_paragraph_ids,
            turns=self.turns,
            turn_budget=self.turn_budget,
        )

    @property
    def retrieved_paragraph_ids(self) -> set[int]:
        """Every paragraph the episode saw: search hits of any tool, and reads."""
        return (
            set(self.semantic_paragraph_ids)
            | set(self.keyword_paragraph_ids)
            | set(self.read_paragraph_ids)
        )

    def to_json(self, include_tokens: bool = False) -> dict[str, Any]:
        """The JSON object of one ``trajectories.jsonl`` line (keys in field order)."""
        data = asdict(self)
        data["stop_reason"] = str(self.stop_reason)
        for turn in data["turns"]:
            turn["error"] = None if turn["error"] is None else str(turn["error"])
            # Written only where they happened, so files from before they existed round-trip.
            if turn["read"] is None:
                del turn["read"]
            if not turn["repaired"]:
                del turn["repaired"]
        data["errors"] = {str(kind): count for kind, count in self.errors.items()}
        data["reward"] = self.reward.as_dict(sparse=True)
        if self.citations is None:  # files written before citations existed stay as they were
            data.pop("citations")
        else:
            data["citations"] = self.citations.to_json()
        data.pop("tokens")
        if include_tokens and self.tokens is not None:
            data["tokens"] = asdict(self.tokens)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trajectory:
        """One ``trajectories.jsonl`` record; TypeError when it is not one (as the dataclass
        constructor raises for a missing field), so that readers can name the bad line."""
        data = dict(data)
        tokens = data.pop("tokens", None)
        try:
            data["turns"] = [_turn_record(turn) for turn in data["turns"]]
            data["errors"] = {parse_turn_error(k): v for k, v in data["errors"].items()}
            data["stop_reason"] = StopReason(data["stop_reason"])
            data["reward"] = RewardBreakdown.from_dict(data["reward"])
            if data.get("citations") is not None:
                data["citations"] = Citations.from_json(data["citations"])
        except (KeyError, ValueError, AttributeError) as error:
            raise TypeError(f"not a trajectory record: {error!r}") from error
        return cls(**data, tokens=TokenTrace(**tokens) if tokens else None)


def _turn_record(data: dict[str, Any]) -> TurnRecord:
    turn = TurnRecord(**data)
    if turn.error is not None:
        turn.error = parse_turn_error(turn.error)
    return turn


def write_trajectories(
    trajectories: Iterable[Trajectory], path: Path, include_tokens: bool = False
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for trajectory in trajectories:
            handle.write(json.dumps(trajectory.to_json(include_tokens)) + "\n")
    return path


def read_trajectories(path: Path) -> list[Trajectory]:
    """Every trajectory of a JSONL file, read from its stored ``.xz`` form where that is what
    is there (``grasp.compressed``)."""
    lines = read_text(path).splitlines()
    return [Trajectory.from_json(json.loads(line)) for line in lines if line.strip()]
