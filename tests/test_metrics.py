"""Tables of hand-computed values for grasp.metrics: normalization, EM/F1, sets, bootstrap."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grasp.metrics import (
    ConfidenceInterval,
    all_gold_found,
    answer_contains,
    bootstrap_ci,
    exact_match,
    f1_score,
    macro_bootstrap_ci,
    normalize_answer,
    paragraph_recall,
    set_f1,
)

# ---------------------------------------------------------------------------------------------
# normalize_answer


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The Big Dog", "big dog"),
        ("An apple, a day.", "apple day"),
        ("  Hello \t  World \n", "hello world"),
        ("U.S.A.", "usa"),
        ("Rock 'n' Roll!", "rock n roll"),
        ("Theory of the anthem", "theory of anthem"),  # articles only as whole words
        ("A-ha", "aha"),  # punctuation goes first, so "a" is no longer a word of its own
        ("The.", ""),
        ("", ""),
        ("“Yes”", "“yes”"),  # official: only ASCII punctuation is removed
        ("1,000", "1000"),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


# ---------------------------------------------------------------------------------------------
# exact_match


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("The Big Dog", ("big dog",), 1.0),
        ("big dog", ("small cat", "Big Dog!"), 1.0),  # max over aliases
        ("big dog", ("big dogs",), 0.0),
        ("yes.", ("Yes",), 1.0),
        ("yes", ("no",), 0.0),
        ("", ("x",), 0.0),
        ("   ", ("x",), 0.0),
        (None, ("x",), 0.0),
        ("x", (), 0.0),
        ("the", ("a",), 0.0),  # normalizes to "" on both sides: still no credit
    ],
)
def test_exact_match(prediction: str | None, gold: tuple[str, ...], expected: float) -> None:
    assert exact_match(prediction, gold) == expected


# ---------------------------------------------------------------------------------------------
# f1_score


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        # p = 2/3 (big, red, dog vs red, dog), r = 1 -> 2 * 2/3 / (5/3) = 0.8
        ("the big red dog", ("red dog",), 0.8),
        # p = 1, r = 2/3 -> 0.8
        ("red dog", ("big red dog",), 0.8),
        # vs "obama": p = 1/2, r = 1 -> 2/3; vs "barack hussein obama": p = 1, r = 2/3 -> 0.8
        ("Barack Obama", ("Obama", "Barack Hussein Obama"), 0.8),
        ("red dog", ("blue cat", "big red dog"), 0.8),
        ("Paris, France", ("paris",), 2 / 3),
        ("dog dog dog", ("dog",), 0.5),  # counts clip: common 1, p = 1/3, r = 1
        ("red cat", ("red dog",), 0.5),
        ("cat", ("dog",), 0.0),
        ("The Big Dog", ("big dog",), 1.0),
        # yes/no/noanswer rule
        ("yes", ("no",), 0.0),
        ("yes", ("yes.",), 1.0),
        ("Yes!", ("yes",), 1.0),
        ("no", ("no way",), 0.0),  # token overlap alone would give 2/3
        ("no way", ("no",), 0.0),  # the rule applies to the gold side too
        ("noanswer", ("no answer",), 0.0),
        ("no", ("yes", "no"), 1.0),  # aliases still maximize
        # empty and missing
        ("", ("x",), 0.0),
        ("  ", ("x",), 0.0),
        (None, ("x",), 0.0),
        ("x", (), 0.0),
        ("the", ("the",), 0.0),  # nothing left after normalization
    ],
)
def test_f1_score(prediction: str | None, gold: tuple[str, ...], expected: float) -> None:
    assert f1_score(prediction, gold) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        # the gold answer, normalized, inside a longer answer
        ("It is the Eiffel Tower.", ("Eiffel Tower",), 1.0),
        ("Eiffel Tower", ("the Eiffel Tower",), 1.0),  # articles dropped on both sides
        ("an Eiffel tower!", ("Eiffel Tower",), 1.0),
        ("Paris, France", ("Paris",), 1.0),  # punctuation dropped
        ("U.S.A. team", ("USA",), 1.0),
        ("Barack Obama", ("Obama",), 1.0),
        ("Rome", ("Rome",), 1.0),  # an exact answer contains itself
        # aliases: any one contained is enough
        ("the city of Lyon", ("Paris", "Lyon"), 1.0),
        ("the city of Nice", ("Paris", "Lyon"), 0.0),
        # token boundaries: a gold answer inside a longer word is not contained
        ("the artist", ("art",), 0.0),
        ("Parisian cafes", ("Paris",), 0.0),
        ("yesterday", ("yes",), 0.0),
        ("no, never", ("no",), 1.0),
        # the tokens must be contiguous and in order
        ("Tower of Eiffel", ("Eiffel Tower",), 0.0),
        ("Eiffel great Tower", ("Eiffel Tower",), 0.0),
        # the prediction is shorter than the gold answer
        ("Eiffel", ("Eiffel Tower",), 0.0),
        # empty and missing: an empty prediction contains nothing
        ("", ("x",), 0.0),
        ("   ", ("x",), 0.0),
        (None, ("x",), 0.0),
        ("the", ("the",), 0.0),  # nothing left after normalization
        ("a dog", ("the",), 0.0),  # a gold answer that normalizes to "" is never contained
        ("x", (), 0.0),
    ],
)
def test_answer_contains(prediction: str | None, gold: tuple[str, ...], expected: float) -> None:
    assert answer_contains(prediction, gold) == expected


def test_scores_accept_a_list_of_gold_answers() -> None:
    assert f1_score("red dog", ["blue", "red dog"]) == 1.0
    assert exact_match("red dog", ["blue", "red dog"]) == 1.0
    assert answer_contains("a red dog", ["blue", "red dog"]) == 1.0


# ---------------------------------------------------------------------------------------------
# Retrieval sets


@pytest.mark.parametrize(
    ("found", "gold", "expected"),
    [
        ({1, 2}, {1, 2, 3}, 2 / 3),
        ({1, 2, 3, 9}, {1, 2, 3}, 1.0),
        ({4, 5}, {1, 2}, 0.0),
        (set(), {1}, 0.0),
        ({1}, set(), 0.0),  # no gold: 0, not a division error
        (set(), set(), 0.0),
        (frozenset({2}), frozenset({1, 2}), 0.5),
    ],
)
def test_paragraph_recall(found: set[int], gold: set[int], expected: float) -> None:
    assert paragraph_recall(found, gold) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("found", "gold", "expected"),
    [
        ({1, 2, 3}, {1, 2}, 1.0),
        ({1, 2}, {1, 2}, 1.0),
        ({1}, {1, 2}, 0.0),
        ({3, 4}, {1, 2}, 0.0),
        (set(), set(), 0.0),
        ({1}, set(), 0.0),
        (frozenset({1, 2}), frozenset({2, 1}), 1.0),
    ],
)
def test_all_gold_found(found: set[int], gold: set[int], expected: float) -> None:
    assert all_gold_found(found, gold) == expected


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ({1, 2}, {1, 2}, 1.0),
        ({1, 2, 3, 4}, {1, 2}, 2 / 3),  # p = 1/2, r = 1
        ({1}, {1, 2}, 2 / 3),  # p = 1, r = 1/2
        ({1, 3}, {1, 2}, 0.5),  # p = r = 1/2
        ({1, 3, 4, 5}, {1, 2}, 1 / 3),  # p = 1/4, r = 1/2 -> 0.25 / 0.75
        ({5}, {1}, 0.0),
        (set(), {1}, 0.0),
        ({1}, set(), 0.0),
        (set(), set(), 0.0),  # nothing to find and nothing read earns no read reward
        (frozenset({1, 2}), frozenset({1, 2}), 1.0),
    ],
)
def test_set_f1(predicted: set[int], gold: set[int], expected: float) -> None:
    assert set_f1(predicted, gold) == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# bootstrap_ci


def test_bootstrap_constant_sample_has_zero_width() -> None:
    ci = bootstrap_ci([0.7] * 5)
    assert ci.low == ci.mean == ci.high
    assert ci.mean == pytest.approx(0.7)
    assert ci.n == 5


def test_bootstrap_single_value() -> None:
    assert bootstrap_ci([3.0]) == ConfidenceInterval(mean=3.0, low=3.0, high=3.0, n=1)


def test_bootstrap_empty_sample_is_nan() -> None:
    ci = bootstrap_ci([])
    assert ci.n == 0
    assert math.isnan(ci.mean) and math.isnan(ci.low) and math.isnan(ci.high)


def test_bootstrap_two_points_spans_them() -> None:
    # Resample means of [0, 1] are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4, so both 2.5%
    # tails land on the extremes.
    ci = bootstrap_ci([0.0, 1.0], n_resamples=1000, seed=0)
    assert (ci.mean, ci.low, ci.high, ci.n) == (0.5, 0.0, 1.0, 2)


def test_bootstrap_width_matches_normal_approximation() -> None:
    # 100 coin flips with mean 0.5: standard error 0.05, so the 95% CI is about 0.5 ± 0.098.
    ci = bootstrap_ci([0.0, 1.0] * 50, n_resamples=2000, seed=0)
    assert ci.mean == 0.5
    assert 0.38 < ci.low < 0.44
    assert 0.56 < ci.high < 0.62


def test_bootstrap_is_deterministic_with_the_seed() -> None:
    values = [float(v) for v in range(20)]
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    assert bootstrap_ci(values, seed=3) != bootstrap_ci(values, seed=4)


def test_bootstrap_higher_confidence_is_wider() -> None:
    values = [0.0, 0.2, 0.9, 1.0, 0.4, 0.4, 0.7]
    narrow = bootstrap_ci(values, confidence=0.8, seed=1)
    wide = bootstrap_ci(values, confidence=0.99, seed=1)
    assert wide.low <= narrow.low < narrow.high <= wide.high
    assert wide.high - wide.low > narrow.high - narrow.low


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_widens_to_the_mean(seed: int) -> None:
    # One resample puts both percentile bounds on a single resample mean, on one side of 1.5;
    # the interval is widened so that it still contains the sample mean.
    ci = bootstrap_ci([0.0, 1.0, 2.0, 3.0], n_resamples=1, seed=seed)
    assert ci.low <= ci.mean == 1.5 <= ci.high
    assert ci.low < ci.high


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_resamples": 0}, "n_resamples"),
        ({"confidence": 0.0}, "confidence"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 95}, "confidence"),
    ],
)
def test_bootstrap_rejects_bad_arguments(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bootstrap_ci([0.0, 1.0], **kwargs)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_bootstrap_rejects_non_finite_values(bad: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        bootstrap_ci([0.0, bad])


# Magnitudes are bounded so that sums stay far from float overflow; metric values are in [0, 1].
@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
        min_size=1,
        max_size=40,
    ),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_bootstrap_interval_contains_mean(values: list[float], seed: int) -> None:
    ci = bootstrap_ci(values, n_resamples=50, seed=seed)
    assert ci.low <= ci.mean <= ci.high
    assert ci.n == len(values)
    # Resample means lie within the sample's range, up to rounding (3 * x / 3 may exceed x).
    tolerance = 1e-9 * max(1.0, max(abs(v) for v in values))
    assert min(values) - tolerance <= ci.low and ci.high <= max(values) + tolerance


# ---------------------------------------------------------------------------------------------
# macro_bootstrap_ci


def test_macro_mean_weighs_groups_not_values() -> None:
    ci = macro_bootstrap_ci([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0]], seed=0)
    assert ci.mean == 0.375 and ci.n == 6  # (0.75 + 0) / 2, not 3 / 6
    assert ci.low <= ci.mean <= ci.high
    assert ci == macro_bootstrap_ci([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0]], seed=0)


def test_macro_constant_groups_have_zero_width() -> None:
    assert macro_bootstrap_ci([[1.0, 1.0], [0.5]]) == ConfidenceInterval(0.75, 0.75, 0.75, 3)


def test_macro_resamples_within_each_group() -> None:
    # The first group cannot vary; the second's resample mean is 0, 0.5 or 1 (p = 1/4, 1/2,
    # 1/4), so the macro resamples are 0.5, 0.75 or 1.0 and the 95% bounds are 0.5 and 1.0.
    ci = macro_bootstrap_ci([[1.0], [0.0, 1.0]], n_resamples=2000, seed=0)
    assert (ci.mean, ci.low, ci.high) == (0.75, 0.5, 1.0)


def test_macro_without_groups_is_nan_and_an_empty_group_is_an_error() -> None:
    ci = macro_bootstrap_ci([])
    assert math.isnan(ci.mean) and math.isnan(ci.low) and ci.n == 0
    with pytest.raises(ValueError, match="group 1 is empty"):
        macro_bootstrap_ci([[1.0], []])
    with pytest.raises(ValueError, match="group 0 holds nan"):
        macro_bootstrap_ci([[math.nan]])
