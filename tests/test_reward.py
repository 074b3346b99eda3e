"""Tables of hand-computed rewards for grasp.reward, plus config and turn-budget errors."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grasp.reward import (
    DEFAULT_REWARD_CONFIG,
    REWARD_TERMS,
    TERM_NAMES,
    RewardBreakdown,
    RewardConfig,
    compute_reward,
    efficiency_reward,
)
from grasp.types import EpisodeEvidence


def make_evidence(
    answer: str | None = "big dog",
    gold_answers: tuple[str, ...] = ("big dog",),
    gold: Iterable[int] = (1, 2),
    semantic: Iterable[int] = (),
    keyword: Iterable[int] = (),
    read: Iterable[int] = (),
    turns_used: int = 2,
    turn_budget: int = 4,
    searches: int = 0,
) -> EpisodeEvidence:
    return EpisodeEvidence(
        answer=answer,
        gold_answers=gold_answers,
        gold_paragraph_ids=frozenset(gold),
        evidence_ids={
            "semantic": frozenset(semantic),
            "keyword": frozenset(keyword),
            "read": frozenset(read),
        },
        turns_used=turns_used,
        turn_budget=turn_budget,
        searches=searches,
    )


# The reference episode: right answer, read exactly the gold, both searches hit gold, half the
# budget left. R = 1 + 0.7 * 1 + 0.15 * 1 + 0.15 * 0.5 = 1.925.
FULL = make_evidence(semantic=(1, 7), keyword=(2, 8), read=(1, 2), turns_used=2, turn_budget=4)


def assert_breakdown(
    got: RewardBreakdown, r_a: float, r_r: float, r_s: float, r_e: float, total: float
) -> None:
    assert (got["R_A"], got["R_R"], got["R_S"], got["R_E"], got.total) == pytest.approx(
        (r_a, r_r, r_s, r_e, total), abs=1e-12
    )


# Columns: evidence, R_A, R_R, R_S, R_E, total (default weights 0.7 / 0.15 / 0.15).
REWARD_TABLE = [
    pytest.param(FULL, 1.0, 1.0, 1.0, 0.5, 1.925, id="full"),
    pytest.param(
        # F1("the big red dog", "red dog") = 0.8; D_r F1: p = r = 1/2; keyword misses gold;
        # R_E = (5 - 1) / 5 = 0.8. Total = 0.8 + 0.35 + 0 + 0.12.
        make_evidence(
            answer="the big red dog",
            gold_answers=("red dog",),
            semantic=(1,),
            keyword=(3,),
            read=(1, 3),
            turns_used=1,
            turn_budget=5,
        ),
        0.8,
        0.5,
        0.0,
        0.8,
        1.27,
        id="partial",
    ),
    pytest.param(
        # Never answered: no R_A, no R_E even with budget left, but R_R and R_S stay.
        make_evidence(answer=None, semantic=(1,), keyword=(2,), read=(1, 2), turns_used=1),
        0.0,
        1.0,
        1.0,
        0.0,
        0.85,
        id="never-answered",
    ),
    pytest.param(
        # F1("red cat", "red dog") = 0.5 exactly: not strictly above the threshold, so no R_E.
        make_evidence(
            answer="red cat",
            gold_answers=("red dog",),
            gold=(1,),
            keyword=(1,),
            read=(1,),
            turns_used=1,
        ),
        0.5,
        1.0,
        0.0,
        0.0,
        1.2,
        id="f1-at-threshold",
    ),
    pytest.param(
        # A wrong answer fast earns nothing from efficiency.
        make_evidence(answer="cat", gold_answers=("dog",), turns_used=1),
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        id="wrong-answer",
    ),
    pytest.param(
        # Over budget clamps R_E to 0.
        make_evidence(turns_used=6, turn_budget=4),
        1.0,
        0.0,
        0.0,
        0.0,
        1.0,
        id="over-budget",
    ),
    pytest.param(
        make_evidence(turns_used=0, turn_budget=4),
        1.0,
        0.0,
        0.0,
        1.0,
        1.15,
        id="no-turns-used",
    ),
    pytest.param(
        # Alias match; read 4 paragraphs, 1 gold of 2: p = 1/4, r = 1/2, F1 = 1/3.
        make_evidence(
            answer="Obama",
            gold_answers=("Barack Obama", "Obama"),
            semantic=(2,),
            read=(1, 5, 6, 7),
            turns_used=3,
            turn_budget=4,
        ),
        1.0,
        1 / 3,
        0.0,
        0.25,
        1.0 + 0.7 / 3 + 0.15 * 0.25,
        id="alias-and-extra-reads",
    ),
    pytest.param(
        # yes/no rule: "no" against "yes" is 0, so no R_E either.
        make_evidence(answer="no", gold_answers=("yes",), semantic=(1,), keyword=(1,), read=(1,)),
        0.0,
        2 / 3,
        1.0,
        0.0,
        0.7 * 2 / 3 + 0.15,
        id="yes-no",
    ),
    pytest.param(
        # No gold paragraphs (a data defect): retrieval terms pay nothing.
        make_evidence(gold=(), semantic=(1,), keyword=(1,), read=(1,)),
        1.0,
        0.0,
        0.0,
        0.5,
        1.075,
        id="no-gold-paragraphs",
    ),
]


@pytest.mark.parametrize(("evidence", "r_a", "r_r", "r_s", "r_e", "total"), REWARD_TABLE)
def test_reward_table(
    evidence: EpisodeEvidence, r_a: float, r_r: float, r_s: float, r_e: float, total: float
) -> None:
    assert_breakdown(compute_reward(evidence), r_a, r_r, r_s, r_e, total)


@pytest.mark.parametrize(
    ("evidence", "em", "f1"),
    [
        (FULL, 1.0, 1.0),
        (make_evidence(answer="the big red dog", gold_answers=("red dog",)), 0.0, 0.8),
        (make_evidence(answer=None), 0.0, 0.0),
        (make_evidence(answer=""), 0.0, 0.0),
    ],
)
def test_answer_metrics(evidence: EpisodeEvidence, em: float, f1: float) -> None:
    breakdown = compute_reward(evidence)
    assert (breakdown.em, breakdown.f1) == pytest.approx((em, f1))
    assert breakdown["R_A"] == breakdown.f1


def test_duplicate_reads_do_not_matter() -> None:
    once = make_evidence(read=[1, 2, 9], keyword=[1], semantic=[2])
    twice = make_evidence(read=[1, 1, 2, 2, 9, 9], keyword=[1, 1], semantic=[2, 2])
    assert compute_reward(once) == compute_reward(twice)
    assert compute_reward(once)["R_R"] == pytest.approx(0.8)  # p = 2/3, r = 1


# Ablations on FULL (R_A = R_R = R_S = 1, R_E = 0.5): each weight scales only its own term.
@pytest.mark.parametrize(
    ("config", "total"),
    [
        (RewardConfig(), 1.925),
        (RewardConfig(alpha=0.0), 1.225),
        (RewardConfig(beta=0.0), 1.775),
        (RewardConfig(gamma=0.0), 1.85),
        (RewardConfig(alpha=0.0, beta=0.0, gamma=0.0), 1.0),
        (RewardConfig(alpha=1.0, beta=1.0, gamma=1.0), 3.5),
        (RewardConfig(efficiency_answer_threshold=1.0), 1.85),  # F1 = 1 is not > 1
    ],
)
def test_config_ablations(config: RewardConfig, total: float) -> None:
    breakdown = compute_reward(FULL, config)
    assert breakdown.total == pytest.approx(total, abs=1e-12)
    # Unweighted terms are reported whatever the weights, so ablated runs still log them.
    assert (breakdown["R_R"], breakdown["R_S"]) == (1.0, 1.0)


def test_threshold_gates_efficiency() -> None:
    partial = make_evidence(answer="the big red dog", gold_answers=("red dog",), turns_used=1)
    assert compute_reward(partial, RewardConfig(efficiency_answer_threshold=0.79))["R_E"] == (0.75)
    assert compute_reward(partial, RewardConfig(efficiency_answer_threshold=0.9))["R_E"] == 0


def test_never_answered_gets_no_efficiency_even_with_a_negative_threshold() -> None:
    # A negative threshold pays R_E for any answer, even a wrong one, but never for no answer.
    config = RewardConfig(efficiency_answer_threshold=-1.0)
    wrong = make_evidence(answer="cat", gold_answers=("dog",), turns_used=1)
    assert compute_reward(wrong, config)["R_E"] == 0.75
    assert compute_reward(make_evidence(answer=None, turns_used=1), config)["R_E"] == 0.0


def test_default_config_matches_the_paper() -> None:
    assert DEFAULT_REWARD_CONFIG == RewardConfig(
        alpha=0.7, beta=0.15, gamma=0.15, efficiency_answer_threshold=0.5
    )


def test_the_default_argument_scores_with_the_paper_weights() -> None:
    # Right answer; read paragraph 1 of the gold {1, 2} (p = 1, r = 1/2: R_R = 2/3); both
    # searches hit gold (R_S = 1); 1 of 4 turns used (R_E = 3/4).
    # R = 1 + 0.7 * 2/3 + 0.15 * 1 + 0.15 * 3/4 = 1.7291666...
    evidence = make_evidence(semantic=(1,), keyword=(2,), read=(1,), turns_used=1, turn_budget=4)
    assert_breakdown(compute_reward(evidence), 1.0, 2 / 3, 1.0, 0.75, 1 + 0.7 * 2 / 3 + 0.2625)
    # Other weights score it otherwise: the default is not any config.
    other = compute_reward(evidence, RewardConfig(alpha=0.0, beta=1.0, gamma=0.0))
    assert other.total == pytest.approx(2.0, abs=1e-12)


def test_config_stores_floats() -> None:
    # Not frozen: Hydra overrides (reward.alpha=0) must be able to set the fields.
    config = RewardConfig(alpha=1, beta=0, gamma=2)
    assert (config.alpha, config.beta, config.gamma) == (1.0, 0.0, 2.0)
    weights = [f for f in fields(config) if f.name != "retrieval_needs_answer"]
    assert all(type(getattr(config, f.name)) is float for f in weights)


def test_retrieval_terms_can_require_an_answer() -> None:
    searched = {"semantic": (1, 7), "keyword": (2, 8), "read": (1, 2), "turns_used": 4}
    gated = RewardConfig(retrieval_needs_answer=True)
    # No answer: with the gate, nothing; without it, R_R + R_S (0.7 + 0.15).
    assert_breakdown(compute_reward(make_evidence(answer=None, **searched)), 0, 1, 1, 0, 0.85)
    assert_breakdown(compute_reward(make_evidence(answer=None, **searched), gated), 0, 0, 0, 0, 0)
    # A wrong answer keeps them: the gate asks for an answer, not a right one.
    wrong = make_evidence(answer="cat", gold_answers=("dog",), **searched)
    assert_breakdown(compute_reward(wrong, gated), 0, 1, 1, 0, 0.85)
    assert compute_reward(FULL, gated) == compute_reward(FULL)
    with pytest.raises(ValueError, match="retrieval_needs_answer must be true or false"):
        RewardConfig(retrieval_needs_answer=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": -0.1}, "alpha"),
        ({"beta": -1.0}, "beta"),
        ({"gamma": -1e-9}, "gamma"),
        ({"alpha": math.nan}, "alpha"),
        ({"beta": math.inf}, "beta"),
        ({"gamma": True}, "gamma"),
        ({"alpha": "0.7"}, "alpha"),
        ({"efficiency_answer_threshold": math.nan}, "efficiency_answer_threshold"),
    ],
)
def test_invalid_config_raises(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RewardConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("turn_budget", [0, -1])
def test_invalid_turn_budget_raises(turn_budget: int) -> None:
    with pytest.raises(ValueError, match="turn_budget"):
        compute_reward(make_evidence(turn_budget=turn_budget))
    # Also for an episode that never answered and so would get no R_E anyway.
    with pytest.raises(ValueError, match="turn_budget"):
        compute_reward(make_evidence(answer=None, turn_budget=turn_budget))


@pytest.mark.parametrize(
    ("turns_used", "turn_budget", "expected"),
    [(0, 4, 1.0), (1, 4, 0.75), (4, 4, 0.0), (9, 4, 0.0), (-2, 4, 1.0), (1, 1, 0.0)],
)
def test_efficiency_reward(turns_used: int, turn_budget: int, expected: float) -> None:
    assert efficiency_reward(turns_used, turn_budget) == expected


def test_as_dict_keys_and_values() -> None:
    assert compute_reward(FULL).as_dict() == pytest.approx(
        {
            "reward/R_A": 1.0,
            "reward/R_R": 1.0,
            "reward/R_S": 1.0,
            "reward/R_E": 0.5,
            "reward/R_F": 1.0,
            "reward/R_N": 0.0,
            "reward/R_G": 1.0,
            "reward/R_C": 0.0,
            "reward/total": 1.925,
            "answer/em": 1.0,
            "answer/f1": 1.0,
        }
    )
    # A trajectory file stores a sparse term only where it is paid (R_N: 0 when answered).
    assert "reward/R_N" not in compute_reward(FULL).as_dict(sparse=True)


@pytest.mark.parametrize(
    ("answer", "penalty", "retrieval_needs_answer", "r_no_answer", "total"),
    [
        (None, 0.0, False, -1.0, 0.7 * 1.0 + 0.15 * 1.0),  # the paper: R_N reported, not paid
        (None, 0.3, False, -1.0, 0.7 + 0.15 - 0.3),  # a read of gold pays, not answering costs
        (None, 0.3, True, -1.0, -0.3),  # with the gate, only the penalty is left
        ("big dog", 0.3, False, 0.0, 1.925),  # answered: no penalty
    ],
)
def test_the_no_answer_penalty_costs_only_episodes_without_an_answer(
    answer, penalty, retrieval_needs_answer, r_no_answer, total
):
    evidence = dataclasses.replace(FULL, answer=answer)
    config = RewardConfig(no_answer_penalty=penalty, retrieval_needs_answer=retrieval_needs_answer)
    reward = compute_reward(evidence, config)
    assert reward["R_N"] == r_no_answer
    assert reward.total == pytest.approx(total)


def test_the_total_is_each_declared_term_times_its_configured_weight():
    config = RewardConfig(
        alpha=0.5,
        beta=0.25,
        gamma=0.125,
        delta=0.0625,
        no_answer_penalty=2.0,
        search_gain=0.375,
        search_cost=0.03125,
    )
    searched = dataclasses.replace(FULL, answer=None, turns_used=4, searches=3)
    for evidence in (FULL, searched):
        reward = compute_reward(evidence, config)
        weighted = sum(term.weight_of(config) * reward[term.name] for term in REWARD_TERMS)
        assert reward.total == weighted
        assert list(reward.terms) == list(TERM_NAMES)
        assert list(TERM_NAMES) == ["R_A", "R_R", "R_S", "R_E", "R_F", "R_N", "R_G", "R_C"]
    assert compute_reward(searched, config)["R_C"] == -1.0


def test_a_term_added_to_the_table_is_computed_weighted_logged_and_stored(monkeypatch):
    """Adding a reward term is one RewardTerm in REWARD_TERMS: compute_reward, the total, the
    logs, the file format and TRL's reward functions and weights all follow from it."""
    from grasp import reward as reward_module
    from grasp.train.trl_bridge import reward_functions, reward_weights

    def r_brevity(scored, config):
        return 1.0 if scored.answered and len(scored.evidence.answer) <= 7 else 0.0

    brevity = reward_module.RewardTerm("R_B", "gamma", r_brevity, "short answers", sparse=True)
    terms = (*reward_module.REWARD_TERMS, brevity)
    monkeypatch.setattr(reward_module, "REWARD_TERMS", terms)
    monkeypatch.setattr(reward_module, "TERM_NAMES", tuple(t.name for t in terms))
    config = RewardConfig()
    reward = compute_reward(FULL, config)  # answer "big dog": 7 characters
    assert reward["R_B"] == 1.0
    assert reward.total == pytest.approx(1.925 + 0.15)
    assert reward.as_dict()["reward/R_B"] == 1.0
    assert reward_module.RewardBreakdown.from_dict(reward.as_dict(sparse=True)) == reward
    functions = reward_functions()
    assert [f.__name__ for f in functions][-2:] == ["R_C", "R_B"]
    assert functions[-1]([None], [None], grasp_reward=[reward]) == [1.0]
    assert reward_weights(config)[-2:] == [0.0, 0.15]


@pytest.mark.parametrize(
    ("turns_used", "invalid_turns", "delta", "r_format", "total"),
    [
        (2, 0, 0.0, 1.0, 1.925),  # the paper's weights: R_F is reported, not paid
        (2, 0, 0.5, 1.0, 2.425),
        (2, 1, 0.5, 0.5, 2.175),
        (2, 2, 0.5, 0.0, 1.925),
    ],
)
def test_format_term_pays_the_share_of_valid_turns(
    turns_used: int, invalid_turns: int, delta: float, r_format: float, total: float
) -> None:
    evidence = dataclasses.replace(FULL, turns_used=turns_used, invalid_turns=invalid_turns)
    reward = compute_reward(evidence, RewardConfig(delta=delta))
    assert reward["R_F"] == pytest.approx(r_format)
    assert reward.total == pytest.approx(total)


def test_format_term_pays_nothing_to_an_episode_that_never_retrieved() -> None:
    # One valid call (an immediate answer) and no search: skipping the tools earns no R_F.
    evidence = make_evidence(semantic=(), keyword=(), read=(), turns_used=1, turn_budget=4)
    reward = compute_reward(evidence, RewardConfig(delta=1.0))
    assert reward["R_F"] == 0.0
    assert reward.total == pytest.approx(1.0 + 0.15 * 0.75)


def test_format_term_is_zero_without_turns() -> None:
    evidence = dataclasses.replace(FULL, answer=None, turns_used=0)
    assert compute_reward(evidence, RewardConfig(delta=1.0))["R_F"] == 0.0


def test_as_dict_prefix() -> None:
    keys = set(compute_reward(FULL).as_dict(prefix="val/reward/"))
    assert keys == {
        "val/reward/R_A",
        "val/reward/R_R",
        "val/reward/R_S",
        "val/reward/R_E",
        "val/reward/R_F",
        "val/reward/R_N",
        "val/reward/R_G",
        "val/reward/R_C",
        "val/reward/total",
        "answer/em",
        "answer/f1",
    }


ids = st.frozensets(st.integers(min_value=0, max_value=8), max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    answer=st.one_of(st.none(), st.sampled_from(["big dog", "dog", "cat", "yes", "", "the"])),
    gold=ids,
    semantic=ids,
    keyword=ids,
    read=ids,
    turns_used=st.integers(min_value=-3, max_value=12),
    turn_budget=st.integers(min_value=1, max_value=10),
)
def test_reward_terms_stay_in_range(
    answer: str | None,
    gold: frozenset[int],
    semantic: frozenset[int],
    keyword: frozenset[int],
    read: frozenset[int],
    turns_used: int,
    turn_budget: int,
) -> None:
    evidence = make_evidence(
        answer=answer,
        gold=gold,
        semantic=semantic,
        keyword=keyword,
        read=read,
        turns_used=turns_used,
        turn_budget=turn_budget,
    )
    b = compute_reward(evidence)
    for term in (b["R_A"], b["R_R"], b["R_S"], b["R_E"], b.em, b.f1):
        assert 0.0 <= term <= 1.0
    assert b["R_S"] in (0.0, 1.0)
    assert 0.0 <= b.total <= 1.0 + 0.7 + 0.15 + 0.15
    if b["R_A"] <= 0.5:
        assert b["R_E"] == 0.0


# Columns: semantic hits, keyword hits, searches that ran, R_G, R_C (gold 1 and 2, two free).
SEARCH_GAIN_TABLE = [
    pytest.param((1, 7), (2, 8), 2, 1.0, 0.0, id="both-gold-two-searches"),
    pytest.param((1, 7), (1, 8), 2, 0.5, 0.0, id="the-second-search-adds-nothing"),
    pytest.param((1, 7), (1, 8), 3, 0.5, -1.0, id="a-repeated-query-costs-and-adds-nothing"),
    pytest.param((1, 7, 2), (1, 8), 3, 1.0, -1.0, id="a-hop-that-finds-the-second-gold"),
    pytest.param((7,), (8,), 5, 0.0, -3.0, id="no-gold-five-searches"),
    pytest.param((), (), 0, 0.0, 0.0, id="no-search"),
]


@pytest.mark.parametrize(("semantic", "keyword", "searches", "r_g", "r_c"), SEARCH_GAIN_TABLE)
def test_search_gain_pays_new_gold_and_search_cost_prices_searches(
    semantic, keyword, searches, r_g, r_c
):
    config = RewardConfig(search_gain=0.5, search_cost=0.05, beta=0.0)
    evidence = make_evidence(semantic=semantic, keyword=keyword, searches=searches)
    got = compute_reward(evidence, config)
    assert (got["R_G"], got["R_C"]) == (r_g, r_c)
    others = sum(term.weight_of(config) * got[term.name] for term in REWARD_TERMS)
    assert got.total == pytest.approx(others)
    assert got.total - compute_reward(evidence, RewardConfig(beta=0.0)).total == pytest.approx(
        0.5 * r_g + 0.05 * r_c
    )


def test_search_gain_follows_retrieval_needs_answer_and_free_searches():
    unanswered = make_evidence(answer=None, semantic=(1,), keyword=(2,), searches=4)
    gated = RewardConfig(search_gain=1.0, search_cost=1.0, retrieval_needs_answer=True)
    assert compute_reward(unanswered, gated)["R_G"] == 0.0
    assert compute_reward(unanswered, gated)["R_C"] == -2.0, "searches cost with or without"
    free = RewardConfig(search_cost=1.0, free_searches=4)
    assert compute_reward(unanswered, free)["R_C"] == 0.0
    with pytest.raises(ValueError, match="free_searches must be a whole number"):
        RewardConfig(free_searches=2.5)
