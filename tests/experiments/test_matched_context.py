"""The baseline table's matched-context section: each trained row against the swept baseline
at its matched depth, a note for a row that is not finished, and the section's lines."""

from __future__ import annotations

from pathlib import Path

from grasp.env.episode import TurnRecord
from grasp.experiments.matched_context import MatchedContext, matched_entries, matched_section
from grasp.rollout.trajectory import write_trajectories


def shown(n: int) -> list[TurnRecord]:
    return [TurnRecord(text="", observation=" ".join(["w"] * n)), TurnRecord(text="")]


def folder(root: Path, trajectories) -> Path:
    write_trajectories(trajectories, root / "hotpotqa" / "trajectories.jsonl")
    return root


def test_each_trained_row_meets_the_swept_baseline_at_its_matched_depth(tmp_path, trajectory):
    trained = folder(
        tmp_path / "v3",
        [trajectory("q1#0", "Warsaw", ("Warsaw",), {1, 2}, semantic={1, 2}, turns=shown(90))],
    )
    for k, found, n in ((3, {1}, 50), (5, {1}, 100), (8, {1, 2}, 160)):
        folder(
            tmp_path / "sweep" / f"k{k}" / "single_step_hybrid",
            [trajectory("q1#0", "Rome", ("Warsaw",), {1, 2}, semantic=found, turns=shown(n))],
        )
    rows = [
        {"baseline": "v3", "status": "finished", "run_dir": str(trained)},
        {"baseline": "v3_warm_start", "status": "unfinished", "run_dir": str(tmp_path / "x")},
    ]
    matched = MatchedContext(tmp_path / "sweep", "single_step_hybrid", ["v3", "v3_warm_start"])
    count = lambda text: len(text.split())  # noqa: E731
    entries = matched_entries(rows, ["hotpotqa"], matched, count)
    done, note = entries
    assert (done["row"], done["b_k"], done["a_context_tokens"], done["b_context_tokens"]) == (
        "v3",
        5,
        90.0,
        100.0,
    )
    assert done["pooled"]["recall"]["difference"] == 0.5
    assert done["pooled"]["em"]["difference"] == 1.0
    assert set(done["datasets"]) == {"hotpotqa"}
    assert note["note"] == "not compared: v3_warm_start is not a finished row of this table"
    lines = matched_section(entries, matched.metrics)
    assert "## at matched context (pooled): each trained row minus `single_step_hybrid`" in lines
    [row] = [line for line in lines if line.startswith("| `v3` ")]
    assert "| 90 | 5 | 100 | +0.500" in row
    assert any(line.startswith("| `v3_warm_start` ") and "not compared" in line for line in lines)
