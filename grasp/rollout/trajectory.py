"""Finished episodes as trajectories: everything a reader, the trainer and the metrics need.

``trajectories.jsonl`` holds one ``Trajectory.to_json()`` per line: the question and its
gold, each turn's text, parsed call (or error) and observation, the stop reason, the
retrieval evidence, the reward breakdown and, optionally, the token ids and mask.

The evidence is one mapping in memory (``Trajectory.evidence_ids``: evidence kind -> sorted
paragraph ids) and one ``<kind>_paragraph_ids`` key per kind on disk, where the files have
always had ``semantic_paragraph_ids``, ``keyword_paragraph_ids`` and ``read_paragraph_ids``:
those three are always written, in that place and order; a kind a tool of its own recorded
follows them (sorted by kind), and is written only where it was recorded.

In memory the fields are typed (``TurnRecord``, ``TurnError``, ``StopReason``,
``RewardBreakdown``); only ``to_json`` flattens them (the reward to its ``area/name`` keys),
and ``from_json`` reads them back, so that the file format stays what it has always been.
A finished, committed ``trajectories.jsonl`` is stored as ``trajectories.jsonl.xz``
(``grasp.compressed``); ``read_trajectories`` reads either.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from grasp.compressed import read_text
from grasp.env.episode import Citations, Episode, TurnRecord, episode_evidence
from grasp.reward import RewardBreakdown
from grasp.rollout.chat import TokenTrace
from grasp.types import (
    CORE_EVIDENCE_KINDS,
    KEYWORD_EVIDENCE,
    READ_EVIDENCE,
    SEMANTIC_EVIDENCE,
    EpisodeEvidence,
    StopReason,
    TurnError,
    evidence_kinds_in_order,
    parse_turn_error,
)

TRAJECTORIES_FILE = "trajectories.jsonl"
"""An evaluation's trajectories, one ``Trajectory.to_json()`` per line."""
EVIDENCE_SUFFIX = "_paragraph_ids"
"""An evidence kind's key in the file is ``<kind>_paragraph_ids``."""


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
    evidence_ids: dict[str, list[int]]
    """Evidence kind -> the paragraph ids recorded under it, sorted (``Episode.evidence_ids``);
    the core kinds are always present (added empty when not given)."""
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

    def __post_init__(self) -> None:
        for kind in CORE_EVIDENCE_KINDS:
            self.evidence_ids.setdefault(kind, [])

    @property
    def semantic_paragraph_ids(self) -> list[int]:
        """D_s: the paragraphs of every semantic-search hit."""
        return self.evidence_ids[SEMANTIC_EVIDENCE]

    @property
    def keyword_paragraph_ids(self) -> list[int]:
        """D_k: the paragraphs of every keyword-search hit."""
        return self.evidence_ids[KEYWORD_EVIDENCE]

    @property
    def read_paragraph_ids(self) -> list[int]:
        """D_r: the paragraphs read."""
        return self.evidence_ids[READ_EVIDENCE]

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
            evidence_ids={kind: sorted(ids) for kind, ids in episode.evidence_ids.items()},
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
            evidence_ids=self.evidence_ids,
            turns=self.turns,
            turn_budget=self.turn_budget,
        )

    @property
    def retrieved_paragraph_ids(self) -> set[int]:
        """Every paragraph the episode saw: search hits of any tool, reads, a tool's own kind."""
        return set().union(*self.evidence_ids.values())

    def to_json(self, include_tokens: bool = False) -> dict[str, Any]:
        """The JSON object of one ``trajectories.jsonl`` line (keys in field order)."""
        data = _flat_evidence(asdict(self))
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
            data["evidence_ids"] = _evidence_from_keys(data)
            data["turns"] = [_turn_record(turn) for turn in data["turns"]]
            data["errors"] = {parse_turn_error(k): v for k, v in data["errors"].items()}
            data["stop_reason"] = StopReason(data["stop_reason"])
            data["reward"] = RewardBreakdown.from_dict(data["reward"])
            if data.get("citations") is not None:
                data["citations"] = Citations.from_json(data["citations"])
        except (KeyError, ValueError, AttributeError) as error:
            raise TypeError(f"not a trajectory record: {error!r}") from error
        return cls(**data, tokens=TokenTrace(**tokens) if tokens else None)


_FIELDS = frozenset(f.name for f in fields(Trajectory))


def _flat_evidence(data: dict[str, Any]) -> dict[str, Any]:
    """``asdict`` output with ``evidence_ids`` replaced, in its place, by one
    ``<kind>_paragraph_ids`` key per kind: the core kinds in their order, then the others."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key != "evidence_ids":
            flat[key] = value
            continue
        for kind in evidence_kinds_in_order(value):
            flat[f"{kind}{EVIDENCE_SUFFIX}"] = value[kind]
    return flat


def _evidence_from_keys(data: dict[str, Any]) -> dict[str, list[int]]:
    """Pop every ``<kind>_paragraph_ids`` key that is not a field (``gold_paragraph_ids`` is)
    from ``data`` into the evidence mapping; KeyError when a core kind is missing."""
    keys = [k for k in data if k.endswith(EVIDENCE_SUFFIX) and k not in _FIELDS]
    evidence = {key.removesuffix(EVIDENCE_SUFFIX): data.pop(key) for key in keys}
    missing = [kind for kind in CORE_EVIDENCE_KINDS if kind not in evidence]
    if missing:
        raise KeyError(f"{missing[0]}{EVIDENCE_SUFFIX}")
    return evidence


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
