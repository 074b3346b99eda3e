"""Deterministic question sampling and train/eval splitting.

The paper evaluates on 500 questions per benchmark drawn with seed 42:
``sample_questions(questions)`` reproduces that protocol. Sampling uses
``random.Random(seed).sample(range(len(questions)), n)`` and keeps the questions in the order
drawn (not re-sorted), so the first ``k`` of a sample of ``n`` are a fixed prefix for a given
input list and seed. The result depends only on the input order, ``n`` and ``seed`` (and the
``random`` module's algorithm, which CPython keeps stable for seeded generators).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from grasp.types import Question

__all__ = [
    "PAPER_SAMPLE_SIZE",
    "PAPER_SEED",
    "TrainEvalSplit",
    "sample_questions",
    "split_train_eval",
]

PAPER_SAMPLE_SIZE = 500
"""Questions per benchmark in the paper's evaluation."""
PAPER_SEED = 42
"""The paper's sampling seed."""


def sample_questions(
    questions: Sequence[Question], n: int = PAPER_SAMPLE_SIZE, seed: int = PAPER_SEED
) -> list[Question]:
    """Draw ``n`` questions without replacement, in the order drawn.

    When ``n`` is at least ``len(questions)`` every question is returned in its original
    order (no shuffling: there is nothing to choose).

    Raises:
        ValueError: ``n`` is negative.
    """
    if n < 0:
        raise ValueError(f"cannot sample a negative number of questions (n={n})")
    if n >= len(questions):
        return list(questions)
    indices = random.Random(seed).sample(range(len(questions)), n)
    return [questions[i] for i in indices]


@dataclass(frozen=True)
class TrainEvalSplit:
    """Two disjoint parts of one question list, each in the original order."""

    train: list[Question]
    eval: list[Question]


def split_train_eval(
    questions: Sequence[Question], eval_fraction: float = 0.5, seed: int = PAPER_SEED
) -> TrainEvalSplit:
    """Split ``questions`` at random into disjoint train and eval parts.

    ``floor(len(questions) * eval_fraction)`` questions go to eval, the rest to train; both
    keep the original order. Positions, not ids, decide membership, so no position is in both.

    Raises:
        ValueError: ``eval_fraction`` is outside [0, 1].
    """
    if not 0.0 <= eval_fraction <= 1.0:
        raise ValueError(f"eval_fraction must be in [0, 1], got {eval_fraction}")
    n_eval = int(len(questions) * eval_fraction)
    eval_positions = set(random.Random(seed).sample(range(len(questions)), n_eval))
    return TrainEvalSplit(
        train=[q for i, q in enumerate(questions) if i not in eval_positions],
        eval=[q for i, q in enumerate(questions) if i in eval_positions],
    )
