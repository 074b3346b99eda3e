"""The ablation comparison on hand-written run folders: exact deltas, missing variants, matching.

Values are sums of powers of two, so every delta below is exact in floating point. Each run's
results.json is a whole ``RunResults`` (the committed full run's, its compared values
replaced), as a trained run writes it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from grasp.env.episode import TurnRecord
from grasp.eval.results import (
    NOT_RECORDED,
    DatasetResults,
    EvaluationResults,
    Interval,
    MacroResults,
    OverallResults,
    PooledResults,
    RolloutTime,
)
from grasp.eval.summary import summarize
from grasp.experiments.ablation import (
    DEV_EVAL_DIR,
    FULL_WEIGHTS_TOTAL,
    Ablation,
    compare,
    is_finished,
    sweep_variants,
    write_comparison,
)
from grasp.experiments.sweep import RunStatus, clear_failure, record_failure
from grasp.paths import REPO_ROOT
from grasp.train.run_folder import RunFolder

TEMPLATE = RunFolder(REPO_ROOT / "results" / "ablations" / "cpu_grasp" / "none").read_results()
"""A committed run's results: every field a run writes, before the test's values replace some."""

WEIGHTS = {"alpha": 0.7, "beta": 0.15, "gamma": 0.15, "delta": 0.5, "threshold": 0.5}
ALL_TOOLS = ["semantic_search", "keyword_search", "read_paragraph", "answer"]


def run_config(run_dir: Path, tools=ALL_TOOLS, seed=0, max_steps=4, **reward) -> dict:
    return {
        "experiment": "cpu_smoke",
        "eval_questions": 8,
        "run_dir": str(run_dir),
        "env": {"tools": list(tools), "top_k": 3},
        "grpo": {"seed": seed, "max_steps": max_steps},
        "rollout": {"reward": {**WEIGHTS, **reward}},
    }


def interval(low: float, high: float) -> Interval:
    return Interval(mean=(low + high) / 2, low=low, high=high, n=8)


def write_run(sweep: Path, variant: str, config: dict, after: dict, steps: int = 4) -> Path:
    """A finished run folder: ``config`` and the template's results, trained ``steps``, its
    evaluation after training with the values of ``after`` (``evaluation``)."""
    run_dir = sweep / variant
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config))
    evaluation = replace(TEMPLATE.after, results=replace(TEMPLATE.after.results, **after))
    results = replace(TEMPLATE, experiment="cpu_smoke", steps=steps, after=evaluation)
    RunFolder(run_dir).write_results(results)
    return run_dir


def evaluation(em, f1, recall, read_recall, terms, calls, total) -> dict:
    reward = {f"reward/{k}": v for k, v in terms.items()} | {"reward/total": total}
    return {
        "em": em,
        "f1": f1,
        "recall": recall,
        "read_recall": read_recall,
        "ci": {"em": interval(0.0, 0.75), "f1": interval(0.125, 0.875)},
        "reward": reward,
        "reward_ci": {"reward/total": interval(0.5, 1.5)},
        "tool_calls_per_episode": calls,
        "questions": 8,
    }


FULL = evaluation(
    0.5,
    0.625,
    0.75,
    0.5,
    {"R_A": 0.625, "R_R": 0.5, "R_S": 0.25, "R_E": 0.5, "R_F": 1.0},
    {"semantic_search": 1.0, "keyword_search": 0.5, "read_paragraph": 1.5, "answer": 1.0},
    total=1.5,
)
NO_READ = evaluation(
    0.25,
    0.375,
    0.75,
    0.25,
    {"R_A": 0.375, "R_R": 0.25, "R_S": 0.5, "R_E": 0.25, "R_F": 0.75},
    {"semantic_search": 2.0, "keyword_search": 1.0, "answer": 0.75},
    total=1.0,
)
NO_RR = evaluation(
    0.5,
    0.75,
    0.5,
    0.0,
    {"R_A": 0.75, "R_R": 0.0, "R_S": 0.5, "R_E": 0.5, "R_F": 1.0},
    {"semantic_search": 1.0, "keyword_search": 1.0, "answer": 1.0},
    total=1.25,
)


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    sweep = tmp_path / "sweep"
    write_run(sweep, "none", run_config(sweep / "none"), FULL)
    no_read_tools = ["semantic_search", "keyword_search", "answer"]
    write_run(sweep, "no_read", run_config(sweep / "no_read", no_read_tools), NO_READ)
    write_run(sweep, "no_rr", run_config(sweep / "no_rr", alpha=0.0), NO_RR)
    return sweep


def rows_by_variant(comparison) -> dict[str, dict]:
    return {row["variant"]: row for row in comparison.rows}


def test_deltas_against_the_full_run_are_exact(sweep):
    rows = rows_by_variant(compare(sweep, ["no_read", "no_rr"]))
    assert list(rows) == ["none", "no_read", "no_rr"]
    no_read = rows["no_read"]["metrics"]
    expected = {
        "em": (0.25, -0.25),
        "f1": (0.375, -0.25),
        "recall": (0.75, 0.0),
        "read_recall": (0.25, -0.25),
        "reward/total": (1.0, -0.5),
        "reward/R_A": (0.375, -0.25),
        "reward/R_R": (0.25, -0.25),
        "reward/R_S": (0.5, 0.25),
        "reward/R_F": (0.75, -0.25),
        "tool_calls/semantic_search": (2.0, 1.0),
        "tool_calls/read_paragraph": (0.0, -1.5),  # not offered: 0 calls, not unknown
        "tool_calls/answer": (0.75, -0.25),
        "tool_calls/total": (3.75, -0.25),
    }
    for key, (value, delta) in expected.items():
        assert (no_read[key]["value"], no_read[key]["delta"]) == (value, delta), key
    assert rows["no_rr"]["metrics"]["f1"] == {"value": 0.75, "delta": 0.125, "ci": [0.125, 0.875]}
    assert rows["no_rr"]["metrics"]["recall"]["ci"] is None  # no interval in this evaluation
    assert rows["none"]["metrics"]["em"] == {"value": 0.5, "delta": 0.0, "ci": [0.0, 0.75]}
    assert rows["none"]["metrics"]["reward/total"]["ci"] == [0.5, 1.5]


def test_reward_at_the_full_runs_weights_restores_the_switched_off_term(sweep):
    rows = rows_by_variant(compare(sweep, ["no_rr"]))
    full = rows["none"]["metrics"][FULL_WEIGHTS_TOTAL]["value"]
    no_rr = rows["no_rr"]["metrics"][FULL_WEIGHTS_TOTAL]["value"]
    # 1 R_A + 0.7 R_R + 0.15 R_S + 0.15 R_E + 0.5 R_F, with the full run's weights for both.
    assert full == pytest.approx(0.625 + 0.35 + 0.0375 + 0.075 + 0.5, abs=1e-12)
    assert no_rr == pytest.approx(0.75 + 0.0 + 0.075 + 0.075 + 0.5, abs=1e-12)
    assert rows["no_rr"]["metrics"][FULL_WEIGHTS_TOTAL]["delta"] == pytest.approx(
        no_rr - full, abs=1e-12
    )
    assert rows["no_rr"]["metrics"]["reward/total"]["value"] == 1.25  # its own weights


def test_missing_unfinished_and_failed_variants_are_rows_not_gaps(sweep):
    (sweep / "no_semantic").mkdir()
    (sweep / "no_semantic" / "config.json").write_text(json.dumps(run_config(sweep)))
    (sweep / "no_rs").mkdir()  # the empty folder a sweep job starts from
    record_failure(sweep / "no_keyword", "scripts/train.py exited with status 1")
    comparison = compare(sweep, [str(a) for a in Ablation])
    rows = rows_by_variant(comparison)
    assert list(rows) == [str(a) for a in Ablation]
    assert {v: r["status"] for v, r in rows.items()} == {
        "none": "finished",
        "no_read": "finished",
        "no_semantic": "unfinished",
        "no_keyword": "failed",
        "no_rr": "finished",
        "no_rs": "missing",
    }
    assert not comparison.complete
    assert rows["no_keyword"]["error"] == "scripts/train.py exited with status 1"
    for variant in ("no_semantic", "no_keyword", "no_rs"):
        cells = rows[variant]["metrics"].values()
        assert all(c == {"value": None, "delta": None, "ci": None} for c in cells)
        assert set(rows[variant]["metrics"]) == set(rows["none"]["metrics"])
    markdown = comparison.markdown()
    assert "| no R_S (beta=0) (`no_rs`) | missing |  |  |  |" in markdown
    assert "| no keyword_search (`no_keyword`) | failed |  |  | scripts/train.py exited" in markdown
    assert "| no R_S (beta=0) (`no_rs`) | — | — | — | — |" in markdown


def test_without_the_full_run_values_stay_and_deltas_are_missing(sweep, tmp_path):
    other = tmp_path / "other"
    write_run(other, "no_read", run_config(other / "no_read"), NO_READ)
    rows = rows_by_variant(compare(other, ["no_read"]))
    assert rows["none"]["status"] == "missing"
    assert rows["no_read"]["metrics"]["em"] == {"value": 0.25, "delta": None, "ci": [0.0, 0.75]}
    assert rows["no_read"]["metrics"][FULL_WEIGHTS_TOTAL]["value"] is None


def test_a_run_that_differs_beyond_its_ablation_is_flagged_not_matched(sweep):
    config = run_config(sweep / "no_rs", seed=1, beta=0.0)
    write_run(sweep, "no_rs", config, NO_RR, steps=3)
    comparison = compare(sweep, ["no_read", "no_rr", "no_rs"])
    rows = rows_by_variant(comparison)
    assert rows["no_read"]["mismatch"] == [] and rows["no_rr"]["mismatch"] == []
    assert rows["no_rs"]["mismatch"] == ["grpo.seed", "steps"]
    assert "not matched: differs from the full run in grpo.seed, steps" in comparison.markdown()


def test_markdown_cells_show_value_interval_and_delta(sweep):
    markdown = compare(sweep, ["no_read"]).markdown()
    assert (
        "| no read_paragraph (`no_read`) | 0.250 [0.000, 0.750] (-0.250) "
        "| 0.375 [0.125, 0.875] (-0.250) | 0.750 (+0.000) | 0.250 (-0.250) |"
    ) in markdown
    assert "| full (`none`) | 0.500 [0.000, 0.750] | 0.625 [0.125, 0.875] | 0.750 | 0.500 |" in (
        markdown
    )
    header = "| variant | semantic_search | keyword_search | read_paragraph | answer | total |"
    assert header in markdown


def test_write_comparison_writes_json_and_markdown(sweep):
    files = write_comparison(sweep, ["no_read"])
    assert json.loads(files.json_path.read_text()) == files.comparison.as_json()
    assert files.markdown_path.read_text() == files.comparison.markdown()
    data = json.loads(files.json_path.read_text())
    assert data["reference"] == "none" and data["complete"] is True
    assert [c["key"] for c in data["columns"]][:4] == ["em", "f1", "recall", "read_recall"]


def test_a_malformed_results_file_is_named(sweep):
    (sweep / "no_read" / "results.json").write_text(json.dumps({"steps": 4}))
    missing = "['experiment', 'data', 'train_questions', 'eval_questions', 'after', 'config']"
    with pytest.raises(ValueError) as raised:
        compare(sweep, ["no_read"])
    path = sweep / "no_read" / "results.json"
    assert str(raised.value) == (
        f"{path}: not a run's results (RunResults: missing keys {missing})"
    )
    after = {k: v for k, v in TEMPLATE.after.to_json().items() if k != "f1"}
    (sweep / "no_read" / "results.json").write_text(
        json.dumps({**TEMPLATE.to_json(), "after": after})
    )
    with pytest.raises(
        ValueError,
        match=r"results.json: not a run's results \(DatasetResults: missing keys \['f1'\]\)",
    ):
        compare(sweep, ["no_read"])
    (sweep / "no_read" / "results.json").write_text("{not json")
    with pytest.raises(ValueError, match="results.json: not valid JSON"):
        compare(sweep, ["no_read"])


def test_sweep_variants_put_the_full_run_first_in_study_order():
    assert sweep_variants(["no_rs", "no_read", "no_rs"]) == [
        Ablation.NONE,
        Ablation.NO_READ,
        Ablation.NO_RS,
    ]
    assert sweep_variants([]) == [Ablation.NONE]
    with pytest.raises(ValueError, match="variants='no_such'"):
        sweep_variants(["no_read", "no_such"])


def test_ablation_names_are_config_files():
    configs = Path(__file__).parents[2] / "configs" / "ablation"
    assert {str(a) for a in Ablation} <= {p.stem for p in configs.glob("*.yaml")}


def test_is_finished_needs_results_the_same_config_the_full_budget_and_no_failure(sweep):
    run_dir = sweep / "none"
    config = run_config(run_dir)
    assert is_finished(run_dir, config)
    assert not is_finished(run_dir, run_config(run_dir, seed=1))
    assert not is_finished(sweep / "no_such", config)
    moved = run_config(Path("results/ablations/cpu_smoke/none"))  # the folder copied elsewhere
    assert is_finished(run_dir, moved)
    longer = run_config(run_dir, max_steps=8)
    (run_dir / "config.json").write_text(json.dumps(longer))  # resumed to 8 steps, interrupted
    assert not is_finished(run_dir, longer)
    (run_dir / "config.json").write_text(json.dumps(config))
    path = record_failure(run_dir, RuntimeError("boom"))
    assert json.loads(path.read_text())["error"] == "RuntimeError: boom"
    assert "RuntimeError: boom" in json.loads(path.read_text())["traceback"]
    assert not is_finished(run_dir, config)
    assert rows_by_variant(compare(sweep, []))["none"]["status"] == RunStatus.FAILED
    clear_failure(run_dir)
    assert is_finished(run_dir, config)


# --- the dev-set evaluation (<variant>/eval_dev, scripts/ablate.py dev_n=N) ------------------


def write_dev_eval(run_dir: Path, episodes) -> None:
    """An eval_dev/ folder as scripts/evaluate.py writes it, for one dataset (untimed)."""
    out = run_dir / DEV_EVAL_DIR
    (out / "hotpotqa").mkdir(parents=True)
    lines = "".join(json.dumps(t.to_json()) + "\n" for t in episodes)
    (out / "hotpotqa" / "trajectories.jsonl").write_text(lines)
    summary, n = summarize(episodes), len(episodes)
    dataset = DatasetResults(
        **summary.summary_fields(),
        scoring_time_s=0.0,
        wall_time_s=0.0,
        wall_time_per_question_s=NOT_RECORDED,
        rollout_time_s=RolloutTime(0.0, 0.0, 0.0),
        questions=n,
        questions_rolled_out=n,
        questions_timed=0,
        rollout_runs=1,
        rollout_code=[],
    )
    overall = OverallResults(PooledResults.of(summary, [dataset]), MacroResults({}, {}))
    config = {"n": n, "datasets": ["hotpotqa"]}
    results = EvaluationResults({"hotpotqa": dataset}, overall, n, config, provenance={})
    (out / "results.json").write_text(json.dumps(results.to_json()))


def test_dev_sets_are_paired_with_the_full_run_question_by_question(sweep, trajectory):
    right = [trajectory(f"q{i}#0", "Paris", ("Paris",), {1, 2}, semantic={1, 2}) for i in range(4)]
    # no_read: right on q0 and q1 only, and it finds one gold paragraph of two on q0 to q3.
    half = [trajectory(f"q{i}#0", "Paris", ("Paris",), {1, 2}, semantic={1}) for i in range(2)]
    half += [trajectory(f"q{i}#0", "Rome", ("Paris",), {1, 2}, semantic={1}) for i in (2, 3)]
    write_dev_eval(sweep / "none", right)
    write_dev_eval(sweep / "no_read", half)
    (sweep / "no_rr" / DEV_EVAL_DIR).mkdir()  # started, not finished
    comparison = compare(sweep, ["no_read", "no_rr", "no_rs"])
    rows = rows_by_variant(comparison)
    full, no_read = rows["none"]["dev"], rows["no_read"]["dev"]
    assert (full["status"], full["n"], list(full["scopes"])) == (
        "finished",
        4,
        ["hotpotqa", "pooled"],
    )
    em = no_read["scopes"]["pooled"]["metrics"]["em"]
    assert (em["value"], em["delta"], em["paired"]) == (0.5, -0.5, 4)
    assert em["delta_ci"][0] <= -0.5 <= em["delta_ci"][1] <= 0.0
    recall = no_read["scopes"]["hotpotqa"]["metrics"]["recall"]
    assert (recall["value"], recall["delta"]) == (0.5, -0.5)
    assert recall["delta_ci"] == [-0.5, -0.5]  # every question differs by exactly -0.5
    assert full["scopes"]["pooled"]["metrics"]["em"]["delta"] is None  # the reference itself
    read = no_read["scopes"]["pooled"]["metrics"]["read_recall"]
    assert (read["value"], read["delta"]) == (0.0, None)  # not one of the paired metrics
    assert no_read["scopes"]["pooled"]["turns_per_episode"] == 1.0
    assert rows["no_rr"]["dev"] == {"status": "unfinished", "error": None, "scopes": {}}
    assert rows["no_rs"]["dev"]["status"] == "missing"
    markdown = comparison.markdown()
    assert "## Dev sets" in markdown
    assert (
        "| no read_paragraph (`no_read`) | pooled | 4 | 0.500 [0.000, 1.000] "
        "(-0.500 [-1.000, +0.000]) |"
    ) in markdown
    assert "| no R_R (alpha=0) (`no_rr`) | unfinished |" in markdown


def test_a_failed_dev_evaluation_is_named_and_leaves_the_training_row(sweep):
    record_failure(sweep / "no_read" / DEV_EVAL_DIR, "scripts/evaluate.py exited with status 1")
    rows = rows_by_variant(compare(sweep, ["no_read"]))
    assert rows["no_read"]["status"] == "finished"
    assert rows["no_read"]["dev"]["status"] == "failed"
    assert rows["no_read"]["dev"]["error"] == "scripts/evaluate.py exited with status 1"


def test_without_dev_evaluations_there_is_no_dev_table(sweep):
    assert "## Dev sets" not in compare(sweep, ["no_read"]).markdown()


def test_dev_evaluations_of_other_questions_are_shown_but_not_paired(sweep, trajectory):
    episodes = [trajectory(f"q{i}#0", "Paris", ("Paris",), {1}, semantic={1}) for i in range(2)]
    write_dev_eval(sweep / "none", episodes)
    write_dev_eval(sweep / "no_read", episodes[:1])  # n=1 against the full run's n=2
    comparison = compare(sweep, ["no_read"])
    no_read = rows_by_variant(comparison)["no_read"]["dev"]
    assert no_read["pairing"] == "not paired: other questions than the full run's (n)"
    assert no_read["scopes"]["pooled"]["metrics"]["em"]["value"] == 1.0
    assert no_read["scopes"]["pooled"]["metrics"]["em"]["delta"] is None
    assert "- no read_paragraph (`no_read`): not paired: other questions" in comparison.markdown()
    (sweep / "none" / DEV_EVAL_DIR / "hotpotqa" / "trajectories.jsonl").unlink()
    write_dev_eval(sweep / "no_rr", episodes)
    pairing = rows_by_variant(compare(sweep, ["no_rr"]))["no_rr"]["dev"]["pairing"]
    assert pairing.startswith("not paired: ") and "no trajectories of ['hotpotqa']" in pairing


def test_a_finished_run_older_than_a_field_that_leaves_it_as_it_was_is_still_finished(sweep):
    run_dir = sweep / "none"
    recorded = run_config(run_dir)
    resolved = {**recorded, "warm_start": {"adapt_plans": False}}
    assert is_finished(run_dir, resolved)  # adapt_plans did not exist; off is how it ran
    assert not is_finished(run_dir, {**recorded, "warm_start": {"adapt_plans": True}})


def test_dev_parts_count_the_context_tokens_the_policy_was_shown(sweep, trajectory):
    def shown(words: int) -> list[TurnRecord]:
        return [TurnRecord(text="", observation=" ".join(["hit"] * words)), TurnRecord(text="")]

    full = [trajectory(f"q{i}#0", "Paris", ("Paris",), {1}, turns=shown(4)) for i in range(2)]
    no_read = [
        trajectory(f"q{i}#0", "Paris", ("Paris",), {1}, turns=shown(2 + 8 * i)) for i in range(2)
    ]
    write_dev_eval(sweep / "none", full)
    write_dev_eval(sweep / "no_read", no_read)
    words = lambda text: len(text.split())  # noqa: E731
    comparison = compare(sweep, ["no_read"], count=words)
    rows = rows_by_variant(comparison)
    assert rows["none"]["dev"]["scopes"]["pooled"]["context_tokens"] == {
        "value": 4.0,
        "ci": [4.0, 4.0],
    }
    tokens = rows["no_read"]["dev"]["scopes"]["hotpotqa"]["context_tokens"]
    assert tokens["value"] == 6.0 and 2.0 <= tokens["ci"][0] <= 6.0 <= tokens["ci"][1] <= 10.0
    assert "| read recall | turns | context tokens |" in comparison.markdown()
    assert "| 2.00 | 4 [4, 4] |" in comparison.markdown()  # two turns, 4 tokens shown
    uncounted = rows_by_variant(compare(sweep, ["no_read"]))["none"]["dev"]["scopes"]["pooled"]
    assert "context_tokens" not in uncounted
