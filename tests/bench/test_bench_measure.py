"""Tests of grasp/bench/measure.py: recall against exact search."""

from __future__ import annotations

import numpy as np
import pytest

from grasp.bench.measure import recall_at_k


def test_recall_at_k_ignores_missing_slots():
    exact = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    approx = np.array([[4, 3, 2, 1], [5, 9, -1, -1]])
    assert recall_at_k(approx, exact) == pytest.approx((4 + 1) / 8)
