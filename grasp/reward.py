"""GRASP's trajectory reward: answer F1 plus read, search and efficiency terms.

    R = R_A + alpha * R_R + beta * R_S + gamma * R_E + delta * R_F + no_answer_penalty * R_N

- R_A: answer F1 against the gold answers (max over aliases, official HotpotQA normalization).
- R_R: set F1 between the paragraphs read (D_r) and the gold paragraphs (D_g).
- R_S: 1 if both semantic search (D_s) and keyword search (D_k) hit a gold paragraph, else 0.
- R_E: (T - T_used) / T, clamped to [0, 1], paid only when R_A > the answer threshold, so a
  policy cannot earn it by answering wrongly and quickly.
- R_F: the share of turns that were valid tool calls, 0 for an episode that retrieved nothing.
  Not in the paper: delta = 0 by default (the paper's R has the four terms above).
- R_N: -1 for an episode that ended without an answer, else 0. Not in the paper:
  no_answer_penalty = 0 by default; a labelled scaffold for runs that pay R_R and R_S
  whether or not the episode answers, so that not answering still costs.
- R_G: the share of the gold paragraphs the episode's searches surfaced (D_s and D_k): each
  search is paid for the gold paragraphs it adds to the earlier ones' (the per-step
  information gain of StepSearch, summed over the episode), so a second hop on a new query
  can pay and a repeated query cannot. Not in the paper: search_gain = 0 by default.
- R_C: minus the searches that ran beyond ``free_searches``: the price of the context a
  search adds, so that hopping is a choice. Not in the paper: search_cost = 0 by default.

Each term is declared once, in ``REWARD_TERMS`` (its name, the ``RewardConfig`` field that
weighs it, how it is computed, its doc); the breakdown's serialization, TRL's reward
functions and weights, the plots, the transcript and the ablation tables are derived from it.
Adding a term is one ``RewardTerm`` there and, when it is weighted, its ``RewardConfig`` field.

A pure function of the episode's ``EpisodeEvidence``, whose paragraphs it reads by evidence
kind (``EpisodeEvidence.paragraph_ids``: D_s, D_k, D_r are the core kinds); it imports only the
shared types and the metrics. Usage::

    from grasp.reward import RewardConfig, compute_reward

    breakdown = compute_reward(evidence, RewardConfig(alpha=0.7))
    breakdown["R_R"]          # one term, before weighting
    log(breakdown.as_dict())  # {"reward/R_A": ..., "reward/total": ..., "answer/em": ...}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

from grasp.metrics import exact_match, f1_score, set_f1
from grasp.types import KEYWORD_EVIDENCE, READ_EVIDENCE, SEMANTIC_EVIDENCE, EpisodeEvidence


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
    no_answer_penalty: float = 0.0
    """Weight of R_N, -1 for an episode that ended without an answer. Not in the paper (0 by
    default): with R_R and R_S paid whether or not the episode answers, it keeps not
    answering a cost, without making every read one (as ``retrieval_needs_answer`` did)."""
    search_gain: float = 0.0
    """Weight of R_G, the share of gold paragraphs the searches surfaced (each search paid
    for the gold it adds). Not in the paper (0 by default)."""
    search_cost: float = 0.0
    """Weight of R_C, minus each search beyond ``free_searches``. Not in the paper (0 by
    default)."""
    free_searches: float = 2.0
    """Searches R_C does not charge (a whole number)."""

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
            if f.name == "free_searches" and value != int(value):
                raise ValueError(
                    f"RewardConfig.free_searches must be a whole number, got {value!r}"
                )
            # Store floats so logged configs and arithmetic never see ints.
            object.__setattr__(self, f.name, float(value))


@dataclass(frozen=True)
class Scored:
    """What several terms read of an episode: whether it answered, and the answer's F1."""

    evidence: EpisodeEvidence
    answered: bool
    f1: float


def _r_answer(s: Scored, config: RewardConfig) -> float:
    return s.f1


def _r_read(s: Scored, config: RewardConfig) -> float:
    if config.retrieval_needs_answer and not s.answered:
        return 0.0
    return set_f1(s.evidence.paragraph_ids(READ_EVIDENCE), s.evidence.gold_paragraph_ids)


def _r_search(s: Scored, config: RewardConfig) -> float:
    if config.retrieval_needs_answer and not s.answered:
        return 0.0
    gold = s.evidence.gold_paragraph_ids
    semantic = s.evidence.paragraph_ids(SEMANTIC_EVIDENCE)
    keyword = s.evidence.paragraph_ids(KEYWORD_EVIDENCE)
    return float(bool(semantic & gold) and bool(keyword & gold))


def _r_efficiency(s: Scored, config: RewardConfig) -> float:
    if not (s.answered and s.f1 > config.efficiency_answer_threshold):
        return 0.0
    return efficiency_reward(s.evidence.turns_used, s.evidence.turn_budget)


def _r_format(s: Scored, config: RewardConfig) -> float:
    # R_F pays only episodes that retrieved something: otherwise an immediate answer is the
    # cheapest valid call, and a policy learns to skip the tools (seen on SmolLM2-135M).
    e = s.evidence
    if e.turns_used == 0 or not e.retrieved_paragraph_ids:
        return 0.0
    return (e.turns_used - e.invalid_turns) / e.turns_used


def _r_no_answer(s: Scored, config: RewardConfig) -> float:
    return 0.0 if s.answered else -1.0


def _r_search_gain(s: Scored, config: RewardConfig) -> float:
    if config.retrieval_needs_answer and not s.answered:
        return 0.0
    gold = s.evidence.gold_paragraph_ids
    if not gold:
        return 0.0
    found = s.evidence.paragraph_ids(SEMANTIC_EVIDENCE) | s.evidence.paragraph_ids(KEYWORD_EVIDENCE)
    return len(found & gold) / len(gold)


def _r_search_cost(s: Scored, config: RewardConfig) -> float:
    return -max(0.0, s.evidence.searches - config.free_searches)


@dataclass(frozen=True)
class RewardTerm:
    """One term of R."""

    name: str
    """Its name in R and in every log (``reward/<name>``)."""
    weight: str | None
    """The ``RewardConfig`` field that weighs it; None: weight 1."""
    compute: Callable[[Scored, RewardConfig], float]
    """Its value for one episode, before weighting."""
    doc: str
    sparse: bool = False
    """Written to a trajectory file only where it is not 0 (a term added after files were
    written: those files read back, and write out, exactly as they were)."""

    def weight_of(self, config: RewardConfig) -> float:
        return 1.0 if self.weight is None else getattr(config, self.weight)


REWARD_TERMS: tuple[RewardTerm, ...] = (
    RewardTerm("R_A", None, _r_answer, "answer F1 (0 when the episode never answered)"),
    RewardTerm("R_R", "alpha", _r_read, "set F1 of the paragraphs read vs the gold paragraphs"),
    RewardTerm("R_S", "beta", _r_search, "1 if both semantic and keyword search hit gold"),
    RewardTerm("R_E", "gamma", _r_efficiency, "unused share of T, when the answer is good"),
    RewardTerm("R_F", "delta", _r_format, "share of turns that were valid calls (scaffold)"),
    RewardTerm("R_N", "no_answer_penalty", _r_no_answer, "-1 without an answer (scaffold)", True),
    RewardTerm("R_G", "search_gain", _r_search_gain, "share of gold the searches found", True),
    RewardTerm("R_C", "search_cost", _r_search_cost, "-1 per search beyond the free ones", True),
)
"""Every term of R, in the order of the logs, TRL's reward functions and the tables."""
TERM_NAMES = tuple(term.name for term in REWARD_TERMS)
"""("R_A", "R_R", ...): the names, in order."""


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward of one episode, term by term, with the answer metrics logged beside it."""

    terms: Mapping[str, float]
    """Each term of ``REWARD_TERMS`` by name, before weighting."""
    total: float
    """The weighted sum of the terms."""
    em: float
    """Exact match of the answer (max over aliases)."""
    f1: float
    """Token F1 of the answer (max over aliases); equal to R_A."""

    def __getitem__(self, name: str) -> float:
        """One term's value by name (``breakdown["R_R"]``)."""
        return self.terms[name]

    def as_dict(self, prefix: str = "reward/", sparse: bool = False) -> dict[str, float]:
        """Flat metrics: every term under ``prefix``, the total, then EM/F1 under ``answer/``.

        ``sparse``: leave out a sparse term that is 0 (how a trajectory file stores it)."""
        flat = {
            f"{prefix}{term.name}": self.terms[term.name]
            for term in REWARD_TERMS
            if not (sparse and term.sparse and self.terms[term.name] == 0.0)
        }
        flat[f"{prefix}total"] = self.total
        flat.update({"answer/em": self.em, "answer/f1": self.f1})
        return flat

    @classmethod
    def from_dict(cls, flat: Mapping[str, float], prefix: str = "reward/") -> RewardBreakdown:
        """The inverse of ``as_dict``. A term absent from ``flat`` reads as 0.0 (files written
        before it existed: R_F, R_N)."""
        return cls(
            terms={name: float(flat.get(f"{prefix}{name}", 0.0)) for name in TERM_NAMES},
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
    """Score one finished episode: every term of ``REWARD_TERMS``, and their weighted sum.

    An episode that never answered gets R_A = EM = R_E = 0 but keeps the R_R and R_S its
    reads and searches earned, unless ``config.retrieval_needs_answer``.

    Raises:
        ValueError: if ``evidence.turn_budget`` < 1.
    """
    # Validated before anything else so a bad budget fails loudly even on unanswered episodes.
    efficiency_reward(evidence.turns_used, evidence.turn_budget)
    answered = evidence.answer is not None
    f1 = f1_score(evidence.answer, evidence.gold_answers) if answered else 0.0
    em = exact_match(evidence.answer, evidence.gold_answers) if answered else 0.0
    scored = Scored(evidence, answered, f1)
    terms = {term.name: term.compute(scored, config) for term in REWARD_TERMS}
    total = sum(term.weight_of(config) * terms[term.name] for term in REWARD_TERMS)
    return RewardBreakdown(terms=terms, total=total, em=em, f1=f1)
