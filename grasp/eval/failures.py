"""Failure codes: one per episode, a pure function of its trajectory and gold.

Every episode gets exactly one code, the first that applies in this order (``g`` the gold
paragraphs, ``seen`` the paragraphs of every search hit and read, ``read`` those read; at
paragraph granularity a hit's paragraph counts as read, as the environment records it):

1. ``correct``: the answer is exactly right (EM, best alias).
2. ``format_failures``: more than half of the turns used were refused (parse errors and
   invalid calls), so malformed output took most of the episode.
3. ``budget_exhausted``: the episode ended on a budget (turns, tokens or wall clock) without
   answering.
4. ``no_recall``: no gold paragraph was ever seen (``g`` not empty, ``g & seen`` empty).
5. ``seen_not_read``: a gold paragraph was seen in a hit but never read.
6. ``wrong_after_evidence``: every gold paragraph was read, and the answer is still wrong
   (or missing).
7. ``early_stop``: the episode stopped with gold still missing and turns left (the paper's
   "conservative early stopping").
8. ``budget_exhausted``: otherwise, it answered on its last turn with gold still missing:
   the turns ran out before the evidence was complete.

After 5, every gold paragraph seen was read, so 6-8 split on whether some gold was never
seen and whether turns were left; the codes are exhaustive. A question without gold
paragraphs is never ``no_recall``; a wrong answer to it is ``wrong_after_evidence``.

    failure_code(trajectory)          # FailureCode.EARLY_STOP
    failure_shares(trajectories)      # {"correct": 0.25, "no_recall": 0.5, ...}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from grasp.metrics import exact_match
from grasp.rollout.trajectory import Trajectory
from grasp.types import StopReason, StrEnum


class FailureCode(StrEnum):
    """Why an episode did (not) get the answer; the table's column order."""

    CORRECT = "correct"
    FORMAT_FAILURES = "format_failures"
    BUDGET_EXHAUSTED = "budget_exhausted"
    NO_RECALL = "no_recall"
    SEEN_NOT_READ = "seen_not_read"
    WRONG_AFTER_EVIDENCE = "wrong_after_evidence"
    EARLY_STOP = "early_stop"


BUDGET_STOPS = frozenset(
    {StopReason.TURN_BUDGET, StopReason.TOKEN_BUDGET, StopReason.WALL_CLOCK_BUDGET}
)


def failure_code(trajectory: Trajectory) -> FailureCode:
    """The episode's code: the first of the module docstring's order that applies."""
    if exact_match(trajectory.answer, trajectory.gold_answers) == 1.0:
        return FailureCode.CORRECT
    invalid = sum(1 for turn in trajectory.turns if turn.error is not None)
    if invalid * 2 > trajectory.turns_used:
        return FailureCode.FORMAT_FAILURES
    if trajectory.stop_reason in BUDGET_STOPS:
        return FailureCode.BUDGET_EXHAUSTED
    gold = set(trajectory.gold_paragraph_ids)
    seen = trajectory.retrieved_paragraph_ids
    read = set(trajectory.read_paragraph_ids)
    if gold and not gold & seen:
        return FailureCode.NO_RECALL
    if (gold & seen) - read:
        return FailureCode.SEEN_NOT_READ
    if gold <= read:
        return FailureCode.WRONG_AFTER_EVIDENCE
    if trajectory.turns_used < trajectory.turn_budget:
        return FailureCode.EARLY_STOP
    return FailureCode.BUDGET_EXHAUSTED


def failure_shares(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """The share of episodes of each code, every code present (0.0 when none has it)."""
    counts = Counter(failure_code(t) for t in trajectories)
    n = max(len(trajectories), 1)
    return {str(code): counts[code] / n for code in FailureCode}
