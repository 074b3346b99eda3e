"""Answer and retrieval metrics: HotpotQA EM/F1, answer containment, paragraph-set scores and
a bootstrap CI.

Everything here is a pure function of its arguments (the bootstrap is seeded), so the reward,
the evaluation and the baselines all score answers the same way. Answers are normalized exactly
as the official ``hotpot_evaluate_v1.py`` does; aliases are scored by taking the maximum.

Usage::

    from grasp.metrics import answer_contains, exact_match, f1_score, bootstrap_ci

    f1_score("the big red dog", ("red dog",))  # 0.8
    answer_contains("the big red dog", ("red dog",))  # 1.0
    bootstrap_ci([0.0, 1.0, 1.0], seed=0)      # ConfidenceInterval(mean=0.667, low=..., ...)
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
# The official script zeroes F1 when either side is one of these and the two differ, so a
# "yes" answer earns nothing from sharing a token with a long gold answer (and vice versa).
_SPECIAL_ANSWERS = frozenset({"yes", "no", "noanswer"})


# ---------------------------------------------------------------------------------------------
# Answers


def normalize_answer(s: str) -> str:
    """Normalize an answer as official HotpotQA does: lower, drop punctuation, articles, spaces.

    The order (lower → punctuation → articles → whitespace) matters: "The." becomes "" only
    because punctuation goes before articles.
    """
    text = s.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


def _exact_match_one(prediction: str, gold: str) -> float:
    normalized_prediction = normalize_answer(prediction)
    # A prediction with no content left after normalization ("the", "...") is never exactly
    # right, even against a gold answer that also normalizes to "" (a dataset defect).
    if not normalized_prediction:
        return 0.0
    return float(normalized_prediction == normalize_answer(gold))


def _f1_one(prediction: str, gold: str) -> float:
    normalized_prediction = normalize_answer(prediction)
    normalized_gold = normalize_answer(gold)
    if normalized_prediction != normalized_gold and (
        normalized_prediction in _SPECIAL_ANSWERS or normalized_gold in _SPECIAL_ANSWERS
    ):
        return 0.0
    prediction_tokens = normalized_prediction.split()
    gold_tokens = normalized_gold.split()
    num_same = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str | None, gold_answers: Iterable[str]) -> float:
    """1.0 if the normalized prediction equals any normalized gold answer, else 0.0.

    A None or blank prediction, or an empty ``gold_answers``, scores 0.0.
    """
    if prediction is None or not prediction.strip():
        return 0.0
    return max((_exact_match_one(prediction, gold) for gold in gold_answers), default=0.0)


def f1_score(prediction: str | None, gold_answers: Iterable[str]) -> float:
    """Official HotpotQA token F1, maximized over the gold answers (aliases).

    When either normalized side is yes/no/noanswer and the two differ, the score is 0. A None
    or blank prediction, or an empty ``gold_answers``, scores 0.0.
    """
    if prediction is None or not prediction.strip():
        return 0.0
    return max((_f1_one(prediction, gold) for gold in gold_answers), default=0.0)


def _token_run_in(needle: Sequence[str], haystack: Sequence[str]) -> bool:
    """True when ``needle`` occurs in ``haystack`` as a contiguous run of items."""
    width = len(needle)
    return any(
        tuple(haystack[start : start + width]) == tuple(needle)
        for start in range(len(haystack) - width + 1)
    )


def answer_contains(prediction: str | None, gold_answers: Iterable[str]) -> float:
    """1.0 if some normalized gold answer (or alias) appears in the normalized prediction as a
    contiguous run of whole tokens, else 0.0: answer containment.

    Token boundaries count: gold "art" is not in "the artist", while gold "Eiffel Tower" is in
    "it is the Eiffel Tower." (both sides normalized as EM normalizes them). A None or blank
    prediction contains nothing, and a gold answer that normalizes to "" is never contained.
    """
    if prediction is None or not prediction.strip():
        return 0.0
    predicted = normalize_answer(prediction).split()
    for gold in gold_answers:
        tokens = normalize_answer(gold).split()
        if tokens and predicted and _token_run_in(tokens, predicted):
            return 1.0
    return 0.0


# ---------------------------------------------------------------------------------------------
# Retrieval over paragraph ids
#
# A question without gold paragraphs is a data defect. Every score below gives it 0.0 rather
# than 1.0 (or a division error), so a broken question can never inflate an average or pay a
# policy for retrieving nothing.


def paragraph_recall(found: AbstractSet[int], gold: AbstractSet[int]) -> float:
    """Fraction of gold paragraphs found, |found ∩ gold| / |gold|; 0.0 when gold is empty."""
    if not gold:
        return 0.0
    return len(found & gold) / len(gold)


def all_gold_found(found: AbstractSet[int], gold: AbstractSet[int]) -> float:
    """1.0 if every gold paragraph was found, else 0.0; 0.0 when gold is empty."""
    if not gold:
        return 0.0
    return float(gold <= found)


def set_f1(predicted: AbstractSet[int], gold: AbstractSet[int]) -> float:
    """F1 between a predicted and a gold set of paragraph ids.

    Both empty gives 0.0, not 1.0: this is the read reward R_R, and "no gold, read nothing"
    must not pay out (see the note above).
    """
    num_same = len(predicted & gold)
    if num_same == 0:
        return 0.0
    precision = num_same / len(predicted)
    recall = num_same / len(gold)
    return 2 * precision * recall / (precision + recall)


# ---------------------------------------------------------------------------------------------
# Confidence intervals


@dataclass(frozen=True)
class ConfidenceInterval:
    """A mean over questions with its percentile-bootstrap interval."""

    mean: float
    """The sample mean (nan for an empty sample)."""
    low: float
    """Lower bound of the interval (nan for an empty sample)."""
    high: float
    """Upper bound of the interval (nan for an empty sample)."""
    n: int
    """How many values (questions) the mean is over."""


def bootstrap_ci(
    values: Sequence[float],
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> ConfidenceInterval:
    """Percentile-bootstrap CI of the mean, resampling questions with replacement.

    An empty sample gives mean = low = high = nan and n = 0 (no estimate, but no crash in an
    evaluation loop over an empty split). A constant sample gives low = high = mean exactly.
    The interval always contains the mean: it is widened to the mean in the rare case where
    rounding or extreme skew puts the percentile bounds on one side of it.

    Raises:
        ValueError: if a value is not finite, ``n_resamples`` < 1 or ``confidence`` is not in
            (0, 1).
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    values_N = np.asarray(values, dtype=np.float64).reshape(-1)
    n = int(values_N.size)
    if n == 0:
        return ConfidenceInterval(mean=math.nan, low=math.nan, high=math.nan, n=0)
    if not np.all(np.isfinite(values_N)):
        raise ValueError("bootstrap_ci values must all be finite (got nan or inf)")
    mean = float(np.mean(values_N))
    # Handled apart so that a constant sample gives an exact zero-width interval: resample
    # means summed in another order could differ from ``mean`` in the last bit.
    if np.all(values_N == values_N[0]):
        return ConfidenceInterval(mean=mean, low=mean, high=mean, n=n)
    rng = np.random.default_rng(seed)
    indices_RN = rng.integers(0, n, size=(n_resamples, n))
    resample_means_R = values_N[indices_RN].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(resample_means_R, [tail, 1.0 - tail])
    return ConfidenceInterval(
        mean=mean, low=min(float(low), mean), high=max(float(high), mean), n=n
    )


def macro_bootstrap_ci(
    groups: Sequence[Sequence[float]],
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> ConfidenceInterval:
    """Percentile-bootstrap CI of a macro average: the mean over groups of each group's mean.

    The bootstrap is stratified: each resample draws every group's questions with replacement
    from that group alone, so each group (dataset) keeps its size and its weight 1/len(groups)
    whatever its size. ``n`` is the number of values over all groups. No groups give
    mean = low = high = nan; all-constant groups give low = high = mean exactly.

    Raises:
        ValueError: if a group is empty, a value is not finite, ``n_resamples`` < 1 or
            ``confidence`` is not in (0, 1).
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    arrays = [np.asarray(group, dtype=np.float64).reshape(-1) for group in groups]
    if not arrays:
        return ConfidenceInterval(mean=math.nan, low=math.nan, high=math.nan, n=0)
    for position, values_N in enumerate(arrays):
        if values_N.size == 0:
            raise ValueError(f"macro_bootstrap_ci group {position} is empty")
        if not np.all(np.isfinite(values_N)):
            raise ValueError(f"macro_bootstrap_ci group {position} holds nan or inf")
    n = sum(int(values_N.size) for values_N in arrays)
    mean = float(np.mean([values_N.mean() for values_N in arrays]))
    if all(np.all(values_N == values_N[0]) for values_N in arrays):
        return ConfidenceInterval(mean=mean, low=mean, high=mean, n=n)
    rng = np.random.default_rng(seed)
    macro_R = np.zeros(n_resamples)
    for values_N in arrays:
        indices_RN = rng.integers(0, values_N.size, size=(n_resamples, values_N.size))
        macro_R += values_N[indices_RN].mean(axis=1)
    macro_R /= len(arrays)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(macro_R, [tail, 1.0 - tail])
    return ConfidenceInterval(
        mean=mean, low=min(float(low), mean), high=max(float(high), mean), n=n
    )
