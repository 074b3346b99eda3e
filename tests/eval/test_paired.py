"""Paired differences between two evaluations: exact per-question values, the pairing by
(dataset, question id), the interval, scripts/compare.py (the baseline table's section: test_baseline_table.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grasp.eval.paired import (
    COMPARABLE_METRICS,
    compare_folders,
    paired_differences,
    question_values,
)
from grasp.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "compare.py"


def test_each_question_is_the_mean_of_its_episodes(trajectory):
    episodes = [
        trajectory("q1#0", "Paris", ("Paris",), {1, 2}, semantic={1}),  # em 1, recall 0.5
        trajectory("q1#1", "Rome", ("Paris",), {1, 2}, semantic={1, 2}),  # em 0, recall 1
        trajectory("q2#0", "Rome", ("Paris",), {1}),  # em 0, recall 0
    ]
    values = question_values(episodes)
    assert values[("hotpotqa", "q1")] == {"em": 0.5, "f1": 0.5, "recall": 0.75}
    assert values[("hotpotqa", "q2")] == {"em": 0.0, "f1": 0.0, "recall": 0.0}


def test_a_minus_b_is_taken_question_by_question_on_the_questions_both_have(trajectory):
    a = [
        trajectory("q1#0", "Paris", ("Paris",), {1}, semantic={1}),
        trajectory("q2#0", "Paris", ("Paris",), {1}),
        trajectory("q3#0", "Rome", ("Paris",), {1}),
        trajectory("only-a#0", "Paris", ("Paris",), {1}),  # not in B: left out
    ]
    b = [
        trajectory("q1#0", "Rome", ("Paris",), {1}),  # b worse on em, f1 and recall
        trajectory("q2#0", "Paris", ("Paris",), {1}, semantic={1}),  # b better on recall
        trajectory("q3#0", "Rome", ("Paris",), {1}),  # tie
    ]
    compared = paired_differences(a, b)
    em, recall = compared["em"], compared["recall"]
    assert (em.mean_a, em.mean_b) == (pytest.approx(2 / 3), pytest.approx(1 / 3))
    assert em.difference.mean == pytest.approx(1 / 3) and em.difference.n == 3
    assert (em.a_higher, em.b_higher) == (1, 0)
    assert recall.difference.mean == pytest.approx(0.0)
    assert (recall.a_higher, recall.b_higher) == (1, 1)
    # Differences (1, 0, 0) on EM: every resample mean lies in [0, 1].
    assert 0.0 <= em.difference.low <= 1 / 3 <= em.difference.high <= 1.0
    assert em.as_json()["ci"] == [em.difference.low, em.difference.high]


def test_the_same_question_id_in_another_dataset_is_another_question(trajectory):
    a = [trajectory("q1#0", "Paris", ("Paris",), {1}, dataset="hotpotqa")]
    b = [trajectory("q1#0", "Paris", ("Paris",), {1}, dataset="musique")]
    with pytest.raises(ValueError, match="no question in common"):
        paired_differences(a, b)


def test_identical_evaluations_differ_by_exactly_zero(trajectory):
    a = [trajectory(f"q{i}#0", "Paris", ("Paris", "Rome")[i % 2 :], {1}) for i in range(5)]
    compared = paired_differences(a, a)
    for metric in ("em", "f1", "recall"):
        d = compared[metric].difference
        assert (d.mean, d.low, d.high, d.n) == (0.0, 0.0, 0.0, 5)


def test_reward_terms_and_read_recall_pair_like_the_table_metrics(trajectory):
    a = [
        trajectory("q1#0", "Paris", ("Paris",), {1, 2}, semantic={1}, read={1}),
        trajectory("q1#1", "Paris", ("Paris",), {1, 2}, semantic={1}, read={1, 2}),
        trajectory("q2#0", "Rome", ("Paris",), {1}),
    ]
    b = [
        trajectory("q1#0", "Rome", ("Paris",), {1, 2}),
        trajectory("q2#0", "Rome", ("Paris",), {1}),
    ]
    values = question_values(a, ("read_recall", "reward/total", "reward/R_A"))
    # q1: read recall 0.5 and 1 over its two episodes; R_A (answer F1) 1 in both.
    assert values[("hotpotqa", "q1")]["read_recall"] == 0.75
    assert values[("hotpotqa", "q1")]["reward/R_A"] == 1.0
    assert values[("hotpotqa", "q1")]["reward/total"] == (a[0].reward.total + a[1].reward.total) / 2
    compared = paired_differences(a, b, metrics=COMPARABLE_METRICS)
    assert list(compared) == list(COMPARABLE_METRICS)
    assert compared["read_recall"].difference.mean == 0.75 / 2
    assert compared["reward/R_A"].difference.mean == 0.5
    with pytest.raises(ValueError, match=r"metrics: \['R_R'\]; choose among em, f1, recall"):
        paired_differences(a, b, metrics=("R_R",))


def _write(folder: Path, trajectories) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(t.to_json()) + "\n" for t in trajectories)
    (folder / "trajectories.jsonl").write_text(lines)


def test_folders_are_compared_on_the_datasets_both_hold_and_pooled(tmp_path, trajectory):
    right = [trajectory(f"h{i}#0", "Paris", ("Paris",), {1}, semantic={1}) for i in range(4)]
    wrong = [trajectory(f"h{i}#0", "Rome", ("Paris",), {1}) for i in range(2)]  # 2 done so far
    musique = [trajectory("m1#0", "Paris", ("Paris",), {1}, dataset="musique")]
    _write(tmp_path / "a" / "hotpotqa", right)
    _write(tmp_path / "a" / "musique", musique)
    _write(tmp_path / "b" / "hotpotqa", wrong)
    comparison = compare_folders(tmp_path / "a", tmp_path / "b")
    assert list(comparison.datasets) == ["hotpotqa"]  # musique: A only
    em = comparison.pooled["em"]
    assert (em.difference.n, em.difference.mean, em.mean_a, em.mean_b) == (2, 1.0, 1.0, 0.0)
    assert comparison.pooled["recall"].difference.mean == 1.0
    assert comparison.as_json()["pooled"]["em"]["a_higher"] == 2
    lines = comparison.markdown().splitlines()
    assert lines[0] == f"A: {tmp_path / 'a'}"
    assert lines[3] == "| part | metric | questions | A | B | A − B [95%] | higher: A / B |"
    assert lines[-3:] == [
        "| pooled | em | 2 | 1.000 | 0.000 | +1.000 [+1.000, +1.000] | 2 / 0 |",
        "| pooled | f1 | 2 | 1.000 | 0.000 | +1.000 [+1.000, +1.000] | 2 / 0 |",
        "| pooled | recall | 2 | 1.000 | 0.000 | +1.000 [+1.000, +1.000] | 2 / 0 |",
    ]
    with pytest.raises(ValueError, match=r"b: no trajectories of \['musique'\]"):
        compare_folders(tmp_path / "a", tmp_path / "b", ["hotpotqa", "musique"])
    with pytest.raises(ValueError, match="hold no dataset's trajectories in common"):
        compare_folders(tmp_path / "a", tmp_path / "empty")


def test_scripts_compare_prints_two_folders_compared_and_writes_the_json(tmp_path, trajectory):
    for side, answer in (("a", "Paris"), ("b", "Rome")):
        episodes = [trajectory(f"q{i}#0", answer, ("Paris",), {1}) for i in range(3)]
        (tmp_path / side / "hotpotqa").mkdir(parents=True)
        lines = "".join(json.dumps(t.to_json()) + "\n" for t in episodes)
        (tmp_path / side / "hotpotqa" / "trajectories.jsonl").write_text(lines)
    out = tmp_path / "ab.json"
    command = [sys.executable, str(SCRIPT), f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}"]
    result = subprocess.run([*command, f"out={out}"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| pooled | em | 3 | 1.000 | 0.000 | +1.000 [+1.000, +1.000] | 3 / 0 |" in result.stdout
    written = json.loads(out.read_text())
    assert written["pooled"]["em"]["difference"] == 1.0
    assert written["datasets"]["hotpotqa"]["em"]["questions"] == 3

    every = subprocess.run([*command, "metrics=[all]"], capture_output=True, text=True, timeout=300)
    assert every.returncode == 0, every.stderr[-3000:]
    # Answer F1 is R_A: 1 against 0 on each question; neither side read a paragraph.
    assert (
        "| pooled | reward/R_A | 3 | 1.000 | 0.000 | +1.000 [+1.000, +1.000] | 3 / 0 |"
        in every.stdout
    )
    assert (
        "| pooled | read_recall | 3 | 0.000 | 0.000 | +0.000 [+0.000, +0.000] | 0 / 0 |"
        in every.stdout
    )
    typo = subprocess.run(
        [*command, "metrics=[reward]"], capture_output=True, text=True, timeout=300
    )
    assert typo.returncode != 0
    assert "metrics: ['reward']; choose among em, f1, recall" in typo.stderr

    missing = subprocess.run(
        [*command, "datasets=[musique]"], capture_output=True, text=True, timeout=300
    )
    assert missing.returncode != 0
    assert "no trajectories of ['musique']" in missing.stderr
