"""Tests of grasp.data.sampling: the paper's 500-question protocol and disjoint splits."""

from __future__ import annotations

import random

import pytest

from grasp.data import (
    PAPER_SAMPLE_SIZE,
    PAPER_SEED,
    TrainEvalSplit,
    load_questions,
    sample_questions,
    split_train_eval,
)
from grasp.types import DatasetName, Question


def _questions(count: int) -> list[Question]:
    return [
        Question(f"q{i}", DatasetName.HOTPOTQA, f"question {i}?", ("a",), "bridge", (), ())
        for i in range(count)
    ]


def test_paper_protocol_constants() -> None:
    assert (PAPER_SAMPLE_SIZE, PAPER_SEED) == (500, 42)


def test_sample_follows_random_sample_over_indices_in_drawn_order() -> None:
    questions = _questions(1000)
    sample = sample_questions(questions)
    expected = random.Random(42).sample(range(1000), 500)
    assert [int(q.question_id[1:]) for q in sample] == expected
    assert len({q.question_id for q in sample}) == 500


def test_sample_is_deterministic_and_seed_dependent() -> None:
    questions = _questions(50)
    assert sample_questions(questions, 10, seed=7) == sample_questions(questions, 10, seed=7)
    assert sample_questions(questions, 10, seed=7) != sample_questions(questions, 10, seed=8)


@pytest.mark.parametrize("n", [500, 1000, 12])
def test_fewer_than_n_returns_all_in_original_order(n: int) -> None:
    questions = _questions(12)
    assert sample_questions(questions, n) == questions


def test_sample_of_bundled_musique_is_all_of_it() -> None:
    musique = load_questions("musique")
    assert len(musique) == 331
    assert sample_questions(musique) == musique


def test_sample_edge_cases() -> None:
    assert sample_questions(_questions(5), 0) == []
    assert sample_questions([], 500) == []
    with pytest.raises(ValueError, match="negative"):
        sample_questions(_questions(5), -1)


@pytest.mark.parametrize(
    ("count", "fraction", "n_eval"), [(485, 0.5, 242), (10, 0.2, 2), (7, 0.0, 0), (7, 1.0, 7)]
)
def test_split_is_disjoint_and_covers_everything(count: int, fraction: float, n_eval: int) -> None:
    questions = _questions(count)
    split = split_train_eval(questions, fraction, seed=3)
    assert isinstance(split, TrainEvalSplit)
    train_ids = {q.question_id for q in split.train}
    eval_ids = {q.question_id for q in split.eval}
    assert len(split.eval) == n_eval and len(split.train) == count - n_eval
    assert not train_ids & eval_ids
    assert train_ids | eval_ids == {q.question_id for q in questions}
    # Each part keeps the original order.
    order = {q.question_id: i for i, q in enumerate(questions)}
    assert [order[q.question_id] for q in split.train] == sorted(
        order[q.question_id] for q in split.train
    )
    assert [order[q.question_id] for q in split.eval] == sorted(
        order[q.question_id] for q in split.eval
    )


def test_split_is_deterministic() -> None:
    questions = _questions(40)
    assert split_train_eval(questions, seed=1) == split_train_eval(questions, seed=1)
    assert split_train_eval(questions, seed=1) != split_train_eval(questions, seed=2)


def test_split_rejects_bad_fraction() -> None:
    with pytest.raises(ValueError, match="eval_fraction"):
        split_train_eval(_questions(4), 1.5)
