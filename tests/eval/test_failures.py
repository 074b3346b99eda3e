"""Failure codes: one hand-built episode per code, the precedence between them, the shares."""

from __future__ import annotations

import dataclasses

import pytest

from grasp.env.episode import TurnRecord
from grasp.eval.failures import FailureCode, failure_code, failure_shares


def _turns(n: int, errors: int = 0) -> list[TurnRecord]:
    """``n`` turns, the first ``errors`` of them refused."""
    return [TurnRecord(text="", error="bad_json" if i < errors else None) for i in range(n)]


# (case, answer, gold, seen by semantic search, read, turns used, refused turns, stop) -> code
CASES = [
    ("right answer", "Paris", {1, 2}, set(), set(), 2, 0, "answered", "correct"),
    ("right despite errors", "Paris", set(), set(), set(), 4, 3, "answered", "correct"),
    ("3 of 4 refused", "Rome", {1, 2}, set(), set(), 4, 3, "answered", "format_failures"),
    ("2 of 4 refused: not most", "Rome", {1, 2}, {5}, set(), 4, 2, "answered", "no_recall"),
    (
        "turn budget, gold read",
        None,
        {1, 2},
        set(),
        {1, 2},
        6,
        0,
        "turn_budget",
        "budget_exhausted",
    ),
    ("token budget", None, {1, 2}, set(), set(), 3, 0, "token_budget", "budget_exhausted"),
    ("gold never seen", "Rome", {1, 2}, {5, 6}, {5}, 3, 0, "answered", "no_recall"),
    ("gold 1 seen, not read", "Rome", {1, 2}, {1, 2}, {2}, 3, 0, "answered", "seen_not_read"),
    ("all gold read", "Rome", {1, 2}, {1}, {1, 2}, 3, 0, "answered", "wrong_after_evidence"),
    (
        "all gold read, no answer",
        None,
        {1, 2},
        set(),
        {1, 2},
        3,
        0,
        "no_tool_call",
        "wrong_after_evidence",
    ),
    ("no gold paragraphs", "Rome", set(), {5}, set(), 2, 0, "answered", "wrong_after_evidence"),
    ("gold 2 missing, turns left", "Rome", {1, 2}, {1}, {1}, 2, 0, "answered", "early_stop"),
    ("gold 2 missing, last turn", "Rome", {1, 2}, {1}, {1}, 6, 0, "answered", "budget_exhausted"),
]


@pytest.mark.parametrize(
    "answer,gold,seen,read,used,refused,stop,expected",
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_episode_gets_the_first_code_that_applies(
    trajectory, answer, gold, seen, read, used, refused, stop, expected
):
    t = trajectory(
        "q#0",
        answer,
        ("Paris",),
        gold,
        semantic=seen,
        read=read,
        turns=_turns(used, refused),
        stop_reason=stop,
    )
    assert t.turn_budget == 6
    assert failure_code(t) is FailureCode(expected)


def test_keyword_hits_and_reads_count_as_seen(trajectory):
    by_keyword = trajectory("q#0", "Rome", ("Paris",), {1}, keyword={1}, turns=_turns(2))
    assert failure_code(by_keyword) is FailureCode.SEEN_NOT_READ
    read_only = trajectory("q#1", "Rome", ("Paris",), {1, 2}, read={1}, turns=_turns(2))
    assert failure_code(read_only) is FailureCode.EARLY_STOP


def test_turns_left_is_measured_against_the_episode_budget(trajectory):
    t = trajectory("q#0", "Rome", ("Paris",), {1, 2}, semantic={1}, read={1}, turns=_turns(3))
    assert failure_code(t) is FailureCode.EARLY_STOP
    assert failure_code(dataclasses.replace(t, turn_budget=3)) is FailureCode.BUDGET_EXHAUSTED


def test_shares_name_every_code_and_sum_to_one(trajectory):
    episodes = [
        trajectory("a#0", "Paris", ("Paris",), {1}, turns=_turns(1)),
        trajectory("b#0", "Rome", ("Paris",), {1}, semantic={5}, turns=_turns(2)),
        trajectory("c#0", "Rome", ("Paris",), {1}, semantic={7}, turns=_turns(2)),
        trajectory("d#0", "Rome", ("Paris",), {1}, read={1}, turns=_turns(2)),
    ]
    shares = failure_shares(episodes)
    assert list(shares) == [str(code) for code in FailureCode]
    assert shares["correct"] == 0.25
    assert shares["no_recall"] == 0.5
    assert shares["wrong_after_evidence"] == 0.25
    assert shares["early_stop"] == 0.0
    assert sum(shares.values()) == 1.0


def test_no_episodes_have_zero_shares():
    assert set(failure_shares([]).values()) == {0.0}
