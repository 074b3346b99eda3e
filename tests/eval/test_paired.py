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


def _shown(text: str) -> list:
    from grasp.env.episode import TurnRecord

    return [TurnRecord(text="", observation=text), TurnRecord(text="")]


@pytest.mark.parametrize(
    ("observations", "gold", "expected"),
    [
        ("[1] Warsaw | the capital of Poland", ("Warsaw",), 1.0),
        ("[1] The Warsaw Pact was signed", ("Warsaw Pact",), 1.0),
        ("[1] Warsawian food", ("Warsaw",), 0.0),  # whole tokens only
        ("[1] nothing here", ("Warsaw", "Varsovie"), 0.0),
        ("[1] Paris, or Varsovie", ("Warsaw", "Varsovie"), 1.0),  # an alias counts
        ("[1] yes, it is", ("yes",), "nan"),  # a yes/no question: undefined
        ("[1] no", ("No",), "nan"),
    ],
)
def test_answer_in_evidence_looks_for_the_gold_answer_in_what_the_tools_showed(
    trajectory, observations, gold, expected
):
    import math

    from grasp.eval.context import answer_in_evidence

    value = answer_in_evidence(
        trajectory("q1#0", "anything", gold, {1}, turns=_shown(observations))
    )
    assert math.isnan(value) if expected == "nan" else value == expected


def test_a_yes_no_question_is_left_out_of_the_answer_in_evidence_pairing(trajectory):
    a = [
        trajectory("q1#0", "x", ("Warsaw",), {1}, turns=_shown("Warsaw")),
        trajectory("q2#0", "x", ("yes",), {1}, turns=_shown("yes")),
    ]
    b = [
        trajectory("q1#0", "x", ("Warsaw",), {1}, turns=_shown("Paris")),
        trajectory("q2#0", "x", ("yes",), {1}, turns=_shown("no")),
    ]
    compared = paired_differences(a, b, metrics=["answer_in_evidence", "em"])
    evidence = compared["answer_in_evidence"]
    assert (evidence.mean_a, evidence.mean_b, evidence.difference.n) == (1.0, 0.0, 1)
    assert compared["em"].difference.n == 2
    only_yes_no = paired_differences(a[1:], b[1:], metrics=["em"])
    assert only_yes_no["em"].difference.n == 1
    with pytest.raises(ValueError, match="undefined on every question"):
        paired_differences(a[1:], b[1:], metrics=["answer_in_evidence"])


def _write_folder(folder: Path, trajectories) -> Path:
    from grasp.rollout.trajectory import write_trajectories

    write_trajectories(trajectories, folder / "hotpotqa" / "trajectories.jsonl")
    return folder


def test_a_row_is_compared_with_the_depth_of_least_context_at_or_above_its_own(
    tmp_path, trajectory
):
    from grasp.eval.paired import compare_at_matched_context, matched_point

    def words(n):  # an observation of n tokens under the test's counter (one per word)
        return _shown(" ".join(["w"] * n))

    a = _write_folder(
        tmp_path / "a",
        [
            trajectory("q1#0", "x", ("g",), {1, 2}, semantic={1, 2}, turns=words(100)),
            trajectory("q2#0", "x", ("g",), {1, 2}, semantic={1}, turns=words(140)),
        ],
    )
    sweep = tmp_path / "sweep"
    recalls = {3: ({1}, set()), 5: ({1}, {1}), 10: ({1, 2}, {1, 2})}
    contexts = {3: 60, 5: 121, 10: 250}
    for k, (first, second) in recalls.items():
        _write_folder(
            sweep / f"k{k}" / "hybrid",
            [
                trajectory("q1#0", "x", ("g",), {1, 2}, semantic=first, turns=words(contexts[k])),
                trajectory("q2#0", "x", ("g",), {1, 2}, semantic=second, turns=words(contexts[k])),
            ],
        )
    count = lambda text: len(text.split())  # noqa: E731
    matched = compare_at_matched_context(a, sweep, "hybrid", count, metrics=["recall"])
    # A shows 120 tokens per episode: k=5 (121) is the least at or above, not k=3 (60).
    assert matched.a_context == 120.0 and matched.point.k == 5 and matched.at_or_above
    assert [(p.k, p.context_tokens) for p in matched.points] == [(3, 60.0), (5, 121.0), (10, 250.0)]
    recall = matched.comparison.pooled["recall"]
    assert (recall.mean_a, recall.mean_b) == (0.75, 0.5)
    assert recall.difference.mean == 0.25 and recall.difference.n == 2
    assert matched.as_json()["b_k"] == 5 and "k=3: 60" in matched.markdown()
    # More context than every depth: the largest, marked as below A's.
    beyond = matched_point(matched.points, 300.0)
    assert beyond.k == 10
    with pytest.raises(ValueError, match="no k<K>/hybrid folder"):
        compare_at_matched_context(a, tmp_path / "empty", "hybrid", count)


def test_scripts_compare_at_matched_context(tmp_path, trajectory):
    a = _write_folder(
        tmp_path / "a", [trajectory("q1#0", "x", ("g",), {1}, semantic={1}, turns=_shown("w w"))]
    )
    for k in (3, 5):
        _write_folder(
            tmp_path / "sweep" / f"k{k}" / "single_step_hybrid",
            [trajectory("q1#0", "x", ("g",), {1}, turns=_shown(" ".join(["w"] * k)))],
        )
    out = tmp_path / "matched.json"
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            f"a={a}",
            "b=single_step_hybrid",
            f"matched_sweep={tmp_path / 'sweep'}",
            "metrics=[recall]",
            f"out={out}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    written = json.loads(out.read_text())
    assert written["b_k"] == 3  # the SmolLM2 tokenizer: A's "w w" is under k=3's five words
    assert written["pooled"]["recall"]["difference"] == 1.0
