"""hits_difference: the same ranking up to score noise, and nothing else."""

from __future__ import annotations

import pytest

from grasp.serve.agreement import hits_difference
from grasp.types import Hit, Retriever


def hits(*units: tuple[int, float]) -> list[Hit]:
    return [
        Hit(pid, pid * 10, f"title {pid}", f"text {pid}", score, Retriever.DENSE, rank)
        for rank, (pid, score) in enumerate(units)
    ]


EXPECTED = hits((1, 0.90), (2, 0.70), (3, 0.50), (4, 0.30))

CASES = [
    ("identical", hits((1, 0.90), (2, 0.70), (3, 0.50), (4, 0.30)), None),
    ("score noise", hits((1, 0.903), (2, 0.698), (3, 0.50), (4, 0.301)), None),
    ("score beyond tolerance", hits((1, 0.90), (2, 0.72), (3, 0.50), (4, 0.30)), "rank 1: score"),
    ("one hit missing", hits((1, 0.90), (2, 0.70), (3, 0.50)), "3 hits, expected 4"),
    ("swap far apart", hits((1, 0.90), (3, 0.70), (2, 0.50), (4, 0.30)), "not a near-tie"),
    (
        "another unit, same score",
        hits((1, 0.90), (9, 0.70), (3, 0.50), (4, 0.30)),
        "not a near-tie",
    ),
    ("a near-tie at the cut-off", hits((1, 0.90), (2, 0.70), (3, 0.50), (9, 0.299)), None),
]


@pytest.mark.parametrize(("name", "found", "problem"), CASES, ids=[c[0] for c in CASES])
def test_hits_difference(name, found, problem):
    difference = hits_difference(found, EXPECTED, score_tolerance=0.005)
    if problem is None:
        assert difference is None
    else:
        assert difference is not None and problem in difference


def test_a_near_tie_may_swap():
    expected = hits((1, 0.90), (2, 0.701), (3, 0.700), (4, 0.30))
    found = hits((1, 0.90), (3, 0.7012), (2, 0.7004), (4, 0.30))
    assert hits_difference(found, expected, 0.005) is None


def test_the_same_unit_with_another_text_differs():
    found = hits((1, 0.90), (2, 0.70), (3, 0.50), (4, 0.30))
    found[2] = Hit(3, 30, "title 3", "other text", 0.50, Retriever.DENSE, 2)
    assert "another title or text" in hits_difference(found, EXPECTED, 0.005)
