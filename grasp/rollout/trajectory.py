"""Finished episodes as trajectories: everything a reader, the trainer and the metrics need.

``trajectories.jsonl`` holds one ``Trajectory.to_json()`` per line: the question and its
gold, each turn's text, parsed call (or error) and observation, the stop reason, the
retrieval evidence, the reward breakdown and, optionally, the token ids and mask.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from grasp.env.environment import Episode
from grasp.reward import RewardBreakdown
from grasp.rollout.chat import TokenTrace
from grasp.types import EpisodeEvidence


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
    turns: list[dict[str, Any]]
    stop_reason: str
    answer: str | None
    turns_used: int
    turn_budget: int
    semantic_paragraph_ids: list[int]
    keyword_paragraph_ids: list[int]
    read_paragraph_ids: list[int]
    tool_calls: dict[str, int]
    errors: dict[str, int]
    reward: dict[str, float]
    """RewardBreakdown.as_dict(): reward/R_A ... reward/total, answer/em, answer/f1."""
    generated_tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    """What the policy reported about the episode (a baseline's name, route, backend usage)."""
    tokens: TokenTrace | None = field(default=None, repr=False)

    @classmethod
    def from_episode(
        cls, episode: Episode, reward: RewardBreakdown, trace: TokenTrace | None
    ) -> Trajectory:
        return cls(
            episode_id=episode.episode_id,
            question_id=episode.question.question_id,
            dataset=str(episode.question.dataset),
            group_id=episode.group_id,
            sample_index=episode.sample_index,
            question=episode.question.question,
            gold_answers=list(episode.question.answers),
            gold_paragraph_ids=sorted(episode.gold_paragraph_ids),
            turns=[asdict(turn) for turn in episode.turns],
            stop_reason=str(episode.stop_reason),
            answer=episode.answer,
            turns_used=episode.turns_used,
            turn_budget=episode.turn_budget,
            semantic_paragraph_ids=sorted(episode.semantic_paragraph_ids),
            keyword_paragraph_ids=sorted(episode.keyword_paragraph_ids),
            read_paragraph_ids=sorted(episode.read_paragraph_ids),
            tool_calls=dict(episode.tool_calls),
            errors=dict(episode.errors),
            reward=reward.as_dict(),
            generated_tokens=sum(trace.env_mask) if trace else 0,
            prompt_tokens=len(trace.prompt_ids) if trace else 0,
            completion_tokens=len(trace.completion_ids) if trace else 0,
            extra=dict(episode.extra),
            tokens=trace,
        )

    def evidence(self) -> EpisodeEvidence:
        """The reward's inputs, rebuilt from what the trajectory recorded."""
        return EpisodeEvidence(
            answer=self.answer,
            gold_answers=tuple(self.gold_answers),
            gold_paragraph_ids=frozenset(self.gold_paragraph_ids),
            semantic_paragraph_ids=frozenset(self.semantic_paragraph_ids),
            keyword_paragraph_ids=frozenset(self.keyword_paragraph_ids),
            read_paragraph_ids=frozenset(self.read_paragraph_ids),
            turns_used=self.turns_used,
            turn_budget=self.turn_budget,
            invalid_turns=sum(1 for turn in self.turns if turn["error"]),
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
        data = asdict(self)
        data.pop("tokens")
        if include_tokens and self.tokens is not None:
            data["tokens"] = asdict(self.tokens)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trajectory:
        data = dict(data)
        tokens = data.pop("tokens", None)
        return cls(**data, tokens=TokenTrace(**tokens) if tokens else None)


def write_trajectories(
    trajectories: Iterable[Trajectory], path: Path, include_tokens: bool = False
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for trajectory in trajectories:
            handle.write(json.dumps(trajectory.to_json(include_tokens)) + "\n")
    return path


def read_trajectories(path: Path) -> list[Trajectory]:
    with path.open() as handle:
        return [Trajectory.from_json(json.loads(line)) for line in handle if line.strip()]
