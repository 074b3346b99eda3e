"""GRASP's trajectory reward: answer F1 plus read, search and efficiency terms.

    R = R_A + alpha * R_R + beta * R_S + gamma * R_E + delta * R_F

- R_A: answer F1 against the gold answers (max over aliases, official HotpotQA normalization).
- R_R: set F1 between the paragraphs read (D_r) and the gold paragraphs (D_g).
- R_S: 1 if both semantic search (D_s) and keyword search (D_k) hit a gold paragraph, else 0.
- R_E: (T - T_used) / T, clamped to [0, 1], paid only when R_A > the answer threshold, so a
  policy cannot earn it by answering wrongly and quickly.
- R_F: the share of turns that were valid tool calls, 0 for an episode that retrieved nothing.
  Not in the paper: delta = 0 by default (the paper's R has the four terms above).

A pure function of the episode's ``EpisodeEvidence``; it imports only the shared types and the
metrics. Usage::

    from grasp.reward import RewardConfig, compute_reward

    breakdown = compute_reward(evidence, RewardConfig(alpha=0.7))
    log(breakdown.as_dict())  # {"reward/R_A": ..., "reward/total": ..., "answer/em": ...}
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from grasp.metrics import exact_match, f1_score, set_f1
from grasp.types import EpisodeEvidence


@dataclass
class RewardConfig:
    """Weights of the auxiliary reward terms and the gate on the efficiency term."""

    alpha: float = 0.7
    """Weight of R_R, the read-paragraph F1 against the gold paragraphs."""
    beta: float = 0.15
    """Weight of R_S, 1 when both semantic and keyword search hit a gold paragraph."""
    gamma: float = 0.15
    """Weight of R_E, the share of the turn budget left unused."""
    efficiency_answer_threshold: float = 0.5
    """R_E is paid only when the answer F1 is strictly above this."""
    delta: float = 0.0
    """Weight of R_F, the share of turns that were valid tool calls, paid only when the episode
    retrieved something. Not in the paper (0 by default): format shaping for tiny models."""
    retrieval_needs_answer: bool = False
    """Pay R_R and R_S only to episodes that answered. Not in the paper (off by default): where
    R_A is almost never earned (SmolLM2-135M), R_S is the only term a group's samples differ
    in, and GRPO learned to search until the turn budget ran out without answering."""

    def __post_init__(self) -> None:
        if not isinstance(self.retrieval_needs_answer, bool):
            raise ValueError(
                "RewardConfig.retrieval_needs_answer must be true or false, got "
                f"{self.retrieval_needs_answer!r}"
            )
        for f in fields(self):
            if f.name == "retrieval_needs_answer":
                continue
            value = getattr(self, f.name)
            # bool is an int subclass; a True weight is a config typo, not 1.0.
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"RewardConfig.{f.name} must be a float, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"RewardConfig.{f.name} must be finite, got {value!r}")
            if f.name != "efficiency_answer_threshold" and value < 0:
                raise ValueError(f"RewardConfig.{f.name} must be >= 0, got {value!r}")
            # Store floats so logged configs and arithmetic never see ints.
            object.__setattr__(self, f.name, float(value))


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward of one episode, term by term, with the answer metrics logged beside it."""

    r_answer: float
    """R_A: answer F1 (0 when the episode never answered)."""
    r_read: float
    """R_R: set F1 of read vs gold paragraphs, before weighting."""
    r_search: float
    """R_S: 1.0 if both search kinds hit a gold paragraph, else 0.0, before weighting."""
    r_efficiency: float
    """R_E: unused share of the turn budget (0 unless the answer clears the threshold)."""
    total: float
    """R_A + alpha * R_R + beta * R_S + gamma * R_E + delta * R_F."""
    em: float
    """Exact match of the answer (max over aliases)."""
    f1: float
    """Token F1 of the answer (max over aliases); equal to r_answer."""
    r_format: float = 0.0
    """R_F: share of the turns used that were valid tool calls (0 for an episode that retrieved
    nothing), before weighting."""

    def as_dict(self, prefix: str = "reward/") -> dict[str, float]:
        """Flat metrics for logging: reward terms under ``prefix``, EM/F1 under ``answer/``."""
        return {
            f"{prefix}R_A": self.r_answer,
            f"{prefix}R_R": self.r_read,
            f"{prefix}R_S": self.r_search,
            f"{prefix}R_E": self.r_efficiency,
            f"{prefix}R_F": self.r_format,
            f"{prefix}total": self.total,
            "answer/em": self.em,
            "answer/f1": self.f1,
        }

    @classmethod
    def from_dict(cls, flat: dict[str, float], prefix: str = "reward/") -> RewardBreakdown:
        """The inverse of ``as_dict`` (how a trajectory file stores the reward).

        ``R_F`` may be absent (files written before it existed read back with 0.0).
        """
        return cls(
            r_answer=flat[f"{prefix}R_A"],
            r_read=flat[f"{prefix}R_R"],
            r_search=flat[f"{prefix}R_S"],
            r_efficiency=flat[f"{prefix}R_E"],
            r_format=flat.get(f"{prefix}R_F", 0.0),
            total=flat[f"{prefix}total"],
            em=flat["answer/em"],
            f1=flat["answer/f1"],
        )


DEFAULT_REWARD_CONFIG = RewardConfig()
"""The paper's weights (alpha=0.7, beta=0.15, gamma=0.15, threshold 0.5)."""


def efficiency_reward(turns_used: int, turn_budget: int) -> float:
    """(T - T_used) / T clamped to [0, 1]; raises ValueError if the budget T is below 1."""
    if turn_budget < 1:
        raise ValueError(f"turn_budget must be >= 1 to compute R_E, got {turn_budget}")
    return min(1.0, max(0.0, (turn_budget - turns_used) / turn_budget))


def compute_reward(
    evidence: EpisodeEvidence, config: RewardConfig = DEFAULT_REWARD_CONFIG
) -> RewardBreakdown:
    """Score one finished episode.

    An episode that never answered gets R_A = EM = R_E = 0 but keeps the R_R and R_S its
    reads and searches earned, unless ``config.retrieval_needs_answer``.

    Raises:
        ValueError: if ``evidence.turn_budget`` < 1.
    """
    # Validated before anything else so a bad budget fails loudly even on unanswered episodes.
    efficiency = efficiency_reward(evidence.turns_used, evidence.turn_budget)
    gold = evidence.gold_paragraph_ids
    answered = evidence.answer is not None
    f1 = f1_score(evidence.answer, evidence.gold_answers) if answered else 0.0
    em = exact_match(evidence.answer, evidence.gold_answers) if answered else 0.0
    r_read = set_f1(evidence.read_paragraph_ids, gold)
    r_search = float(
        bool(evidence.semantic_paragraph_ids & gold) and bool(evidence.keyword_paragraph_ids & gold)
    )
    if config.retrieval_needs_answer and not answered:
        r_read = r_search = 0.0
    r_efficiency = efficiency if answered and f1 > config.efficiency_answer_threshold else 0.0
    # R_F pays only episodes that retrieved something: otherwise an immediate answer is the
    # cheapest valid call, and a policy learns to skip the tools (seen on SmolLM2-135M).
    retrieved = (
        evidence.semantic_paragraph_ids
        | evidence.keyword_paragraph_ids
        | evidence.read_paragraph_ids
    )
    r_format = 0.0
    if evidence.turns_used > 0 and retrieved:
        r_format = (evidence.turns_used - evidence.invalid_turns) / evidence.turns_used
    total = f1 + config.alpha * r_read + config.beta * r_search + config.gamma * r_efficiency
    total += config.delta * r_format
    return RewardBreakdown(
        r_answer=f1,
        r_read=r_read,
        r_search=r_search,
        r_efficiency=r_efficiency,
        total=total,
        em=em,
        f1=f1,
        r_format=r_format,
    )
