"""Whether two result lists are the same ranking: how remote answers are checked against local ones.

A query's dense vector depends, in its last bits, on the other queries encoded in the same
batch (a bf16 encoder rounds differently with other padding and batch shapes). Merging
requests in the service therefore moves dense scores by up to a few 1e-3 on the cosine, and
can swap two hits whose scores are that close, exactly as the in-process search already
differs between two batch compositions. ``hits_difference`` accepts exactly that: scores
equal rank by rank within a tolerance, and units equal rank by rank except where a near-tie
(scores within the tolerance) makes their order, or which one makes the top k, a matter of
rounding. Anything else (another query's hits, a missing hit, a wrong text) is a difference.
"""

from __future__ import annotations

from collections.abc import Sequence

from grasp.types import Hit


def hits_difference(
    found: Sequence[Hit], expected: Sequence[Hit], score_tolerance: float
) -> str | None:
    """None when ``found`` is ``expected`` up to score noise of ``score_tolerance``, else why not."""
    if len(found) != len(expected):
        return f"{len(found)} hits, expected {len(expected)}"
    for rank, (a, b) in enumerate(zip(found, expected, strict=True)):
        if a.rank != rank or a.retriever != b.retriever:
            return f"rank {rank}: rank {a.rank} / retriever {a.retriever}, expected {b.retriever}"
        if abs(a.score - b.score) > score_tolerance:
            return f"rank {rank}: score {a.score}, expected {b.score} (tolerance {score_tolerance})"
    units = {_unit(h): h for h in expected}
    for rank, (a, b) in enumerate(zip(found, expected, strict=True)):
        same = units.get(_unit(a))
        if same is not None and (a.title, a.text) != (same.title, same.text):
            return f"rank {rank}: unit {_unit(a)} has another title or text than expected"
        if _unit(a) == _unit(b):
            continue
        if not (_near_tie(a, found, score_tolerance) and _near_tie(b, expected, score_tolerance)):
            return f"rank {rank}: unit {_unit(a)}, expected {_unit(b)} (not a near-tie)"
        if _unit(a) not in units and a.score < expected[-1].score - score_tolerance:
            return f"rank {rank}: unit {_unit(a)} is not among the expected hits"
    return None


def _unit(hit: Hit) -> tuple[int, int | None]:
    return hit.paragraph_id, hit.sentence_id


def _near_tie(hit: Hit, hits: Sequence[Hit], tolerance: float) -> bool:
    """Whether another hit of the list, or the cut-off after the last, is within tolerance."""
    others = [h.score for h in hits if h is not hit]
    at_cutoff = hit is hits[-1]
    return at_cutoff or any(abs(hit.score - s) <= 2 * tolerance for s in others)
