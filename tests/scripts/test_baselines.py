"""scripts/baselines.py: its composition (no evaluation), and a real sweep of three baselines.

The composition tests compose every baseline as the sweep plans it and check that it is
exactly what scripts/evaluate.py composes for policy=hf baseline=NAME. The end-to-end test
evaluates two baselines with the heuristic search agent (policy=scripted, no model) on the
tiny corpus, one question set and its prebuilt index, plus direct, which fails for real (it
needs a language model as its backend); then reruns the two (both skipped).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from grasp.config import BaselinesConfig, EvaluateConfig, register_configs, to_dataclass
from grasp.data import write_normalized
from grasp.experiments.baseline_table import Baseline
from grasp.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "baselines.py"
register_configs()


@pytest.fixture(scope="module")
def baselines():
    from grasp.experiments import baseline_sweep

    return baseline_sweep


@pytest.fixture
def hydra_configs():
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        yield


def test_every_baseline_config_is_a_row():
    files = {p.stem for p in (REPO_ROOT / "configs" / "baseline").glob("*.yaml")}
    assert {str(b) for b in Baseline} == files


def test_the_sweep_composes_as_evaluate_py_with_policy_hf(hydra_configs):
    swept = OmegaConf.to_container(compose("baselines", overrides=["baseline=ircot"]), resolve=True)
    keys = ("baselines", "sweep_dir", "context_tokens", "dry_run", "table_only")
    popped = [swept.pop(k) for k in keys]
    assert popped == [[str(b) for b in Baseline], "runs/baselines/hf", True, False, False]
    assert swept.pop("paired") == [
        ["cpu_grasp", "cpu_grasp_warm_start"],
        ["cpu_grasp", "single_step_hybrid"],
        ["cpu_grasp_warm_start", "single_step_hybrid"],
        ["cpu_grasp", "ircot"],
        ["cpu_grasp_ds", "cpu_grasp"],
        ["cpu_grasp_v2", "cpu_grasp_v2_warm_start"],
        ["cpu_grasp_v2", "single_step_hybrid"],
        ["cpu_grasp_v2_warm_start", "single_step_hybrid"],
        ["cpu_grasp_v2", "cpu_grasp"],
    ]
    assert swept.pop("trained") == {
        "cpu_grasp": {
            "run_dir": "results/cpu_grasp",
            "stage": "final",
            "label": "GRASP, cpu_grasp (after GRPO)",
        },
        "cpu_grasp_warm_start": {
            "run_dir": "results/cpu_grasp",
            "stage": "warm_start",
            "label": "cpu_grasp warm start (before GRPO)",
        },
        "cpu_grasp_ds": {
            "run_dir": "results/cpu_grasp_ds",
            "stage": "final",
            "label": "cpu_grasp with dynamic sampling (after GRPO)",
        },
        "cpu_grasp_v2": {
            "run_dir": "results/cpu_grasp_v2",
            "stage": "final",
            "label": "GRASP, cpu_grasp_v2 (after 150 GRPO steps)",
        },
        "cpu_grasp_v2_warm_start": {
            "run_dir": "results/cpu_grasp_v2",
            "stage": "warm_start",
            "label": "cpu_grasp_v2 warm start (before GRPO)",
        },
    }
    assert swept.pop("matched_context") == {
        "sweep": "results/baselines/k_sweep_hybrid",
        "baseline": "single_step_hybrid",
        "metrics": ["recall", "answer_in_evidence", "em", "f1"],
    }
    evaluated = compose("evaluate", overrides=["policy=hf", "baseline=ircot"])
    assert swept == OmegaConf.to_container(evaluated, resolve=True)


def test_every_baseline_is_planned_as_evaluate_py_composes_it(baselines, hydra_configs):
    task = ["n=7", "baselines=[ircot,direct,single_step_rerank]", "sweep_dir=/s"]
    config = to_dataclass(compose("baselines", overrides=task), BaselinesConfig)
    config.trained = {}  # their rows: test_trained_rows_are_evaluated_in_their_runs_environment
    assert config.baselines == ["direct", "single_step_rerank", "ircot"]  # the table's order
    shared = baselines.evaluate_overrides(task, {"policy": "hf"})
    assert shared == ["policy=hf", "n=7"]
    jobs = {
        str(job.baseline): (job, overrides) for job, overrides in baselines.plan(config, shared)
    }
    assert list(jobs) == ["direct", "single_step_rerank", "ircot"]
    rerank, _ = jobs["single_step_rerank"]
    assert (rerank.config, rerank.not_run) == (None, "needs baseline.reranker.path")
    for name in ("direct", "ircot"):
        job, overrides = jobs[name]
        assert overrides == ["policy=hf", "n=7", f"baseline={name}", f"out=/s/{name}"]
        assert job.run_dir == Path("/s") / name
        expected = compose("evaluate", overrides=["policy=hf", "n=7", f"baseline={name}"])
        expected = dataclasses.asdict(to_dataclass(expected, EvaluateConfig))
        assert job.config == {**expected, "out": f"/s/{name}"}
    assert jobs["ircot"][0].config["env"]["tools"] == [
        "semantic_search",
        "keyword_search",
        "answer",
    ]

    task = ["policy=openai", "baselines=[single_step_rerank]", "baseline.reranker.path=/m"]
    config = to_dataclass(compose("baselines", overrides=task), BaselinesConfig)
    config.trained = {}
    shared = baselines.evaluate_overrides(task, {"policy": "openai"})
    [(job, _)] = baselines.plan(config, shared)
    assert job.not_run is None and job.config["baseline"]["reranker"]["path"] == "/m"
    assert job.run_dir == Path("runs/baselines/openai/single_step_rerank")


def _trained_run(run: Path) -> Path:
    """A run folder as a LoRA run with a warm start leaves it (no weights: none are read)."""
    from grasp.env.environment import EnvConfig
    from grasp.train.config import TrainConfig
    from grasp.train.warm_start import WarmStartSettings

    (run / "warm_start" / "adapter").mkdir(parents=True)
    (run / "warm_start" / "adapter" / "adapter_config.json").write_text("{}")
    (run / "final").mkdir()
    config = TrainConfig(env=EnvConfig(turn_budget=3), warm_start=WarmStartSettings(enabled=True))
    (run / "config.json").write_text(json.dumps(dataclasses.asdict(config), default=str))
    return run


def test_trained_rows_are_evaluated_in_their_runs_environment(baselines, hydra_configs, tmp_path):
    run = _trained_run(tmp_path / "run")
    task = ["n=7", "baselines=[direct]", "sweep_dir=/s"]
    task.append(f"+trained.mine={{run_dir:'{run}',stage:warm_start,label:Mine}}")
    task.append(f"+trained.gone={{run_dir:'{tmp_path / 'gone'}',label:Gone}}")
    config = to_dataclass(compose("baselines", overrides=task), BaselinesConfig)
    assert list(config.trained) == [
        "cpu_grasp",
        "cpu_grasp_warm_start",
        "cpu_grasp_ds",
        "cpu_grasp_v2",
        "cpu_grasp_v2_warm_start",
        "mine",
        "gone",
    ]
    config.trained = {name: config.trained[name] for name in ("mine", "gone")}
    shared = baselines.evaluate_overrides(task, {"policy": "hf"})
    assert shared == ["policy=hf", "n=7"]
    direct, (mine, mine_overrides), (gone, _) = baselines.plan(config, shared)
    assert str(direct[0].baseline) == "direct"
    # policy=hf is the run's to fix: dropped, not refused.
    assert mine_overrides == ["n=7", f"run_dir={run}", "stage=warm_start", "out=/s/mine"]
    assert (mine.baseline, mine.row_label, mine.run_dir) == ("mine", "Mine", Path("/s/mine"))
    assert mine.config["n"] == 7 and mine.config["out"] == "/s/mine"
    assert mine.config["env"]["turn_budget"] == 3  # the run's, not evaluate.yaml's
    assert mine.config["rollout"]["sampling"]["temperature"] == 0.0  # greedy
    assert mine.config["policy"]["adapters"] == [str(run / "warm_start" / "adapter")]
    assert (gone.not_run, gone.config) == (f"no training run in {tmp_path / 'gone'}", None)
    with pytest.raises(ValueError, match=r"trained: \['direct'\] are baseline names"):
        to_dataclass(
            compose("baselines", overrides=["+trained.direct={run_dir:/r,label:D}"]),
            BaselinesConfig,
        )


def test_unknown_baseline_and_per_job_fields_are_refused(baselines, hydra_configs):
    with pytest.raises(ValueError, match="baselines='ircott' is not one of: none, search_r1, "):
        to_dataclass(compose("baselines", overrides=["baselines=[ircott]"]), BaselinesConfig)
    with pytest.raises(ValueError, match=r"paired: \['ircott'\] name no row \(baselines and"):
        to_dataclass(compose("baselines", overrides=["paired=[[ircot,ircott]]"]), BaselinesConfig)
    with pytest.raises(ValueError, match=r"paired: \['ircot'\] is not two different rows"):
        to_dataclass(compose("baselines", overrides=["paired=[[ircot]]"]), BaselinesConfig)
    with pytest.raises(ValueError, match="dry_run and table_only: choose one"):
        to_dataclass(
            compose("baselines", overrides=["dry_run=true", "table_only=true"]), BaselinesConfig
        )
    with pytest.raises(ValueError, match="out= cannot be set: .* choose sweep_dir="):
        baselines.evaluate_overrides(["out=/x"], {"policy": "hf"})
    with pytest.raises(ValueError, match=r"baseline= cannot be set: .* baselines=\[...\]"):
        baselines.evaluate_overrides(["baseline=ircot"], {"policy": "hf"})


def run(command: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)


@pytest.fixture
def sweep(tmp_path, tiny_questions, tiny_index_dir) -> Path:
    """A sweep folder, next to the tiny questions as hotpotqa's dev set and their index."""
    write_normalized(list(tiny_questions), tmp_path / "data" / "hotpotqa" / "dev.jsonl")
    (tmp_path / "indexes").mkdir()
    (tmp_path / "indexes" / "hotpotqa-dev").symlink_to(tiny_index_dir)  # the same corpus
    return tmp_path / "sweep"


def sweep_command(sweep: Path) -> list[str]:
    """scripts/baselines.py with the scripted agent on 2 of the tiny questions into ``sweep``."""
    return [
        sys.executable,
        str(SCRIPT),
        "policy=scripted",
        "datasets=[hotpotqa]",
        f"data_dir={sweep.parent / 'data'}",
        f"index_root={sweep.parent / 'indexes'}",
        "n=2",
        f"sweep_dir={sweep}",
        "~trained",  # the baselines only: the trained rows are planned in their own test
        "paired=[]",  # the committed pairs name trained rows
    ]


@pytest.mark.slow
def test_the_committed_baselines_are_finished_under_todays_configuration():
    """A config field added since results/baselines/hf ran must not make the sweep evaluate
    those baselines again (or refuse to resume into their folders): each field that cannot
    have changed their trajectories is listed in grasp/experiments/sweep.py's predates. The table was
    made in bfloat16: the dtypes are pinned, since ${cpu_dtype:} is float32 on a CPU without
    native bfloat16."""
    bf16 = [
        "policy.model.dtype=bfloat16",
        "index.encoder.dtype=bfloat16",
        "judge.model.dtype=bfloat16",
    ]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "sweep_dir=results/baselines/hf", "dry_run=true", *bf16],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    committed = sorted(
        p.parent.name for p in (REPO_ROOT / "results" / "baselines" / "hf").glob("*/results.json")
    )
    baselines = [name for name in committed if name in {str(b) for b in Baseline}]
    assert len(baselines) >= 10, committed
    for name in baselines:
        assert lines[name] == f"finished in results/baselines/hf/{name}, would be skipped"
    assert lines["single_step_rerank"] == "not run (needs baseline.reranker.path)"


def test_a_sweep_evaluates_skips_records_failures_and_tabulates(sweep):
    command = sweep_command(sweep)
    result = run([*command, "baselines=[direct,none,search_r1]"])
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "baseline direct: scripts/evaluate.py exited with status 1" in output
    assert (
        "needs a language model as its backend" in (sweep / "direct" / "evaluate.log").read_text()
    )
    table = json.loads((sweep / "table.json").read_text())
    assert table["complete"] is False and table["datasets"] == ["hotpotqa"]
    rows = {row["baseline"]: row for row in table["rows"]}
    assert list(rows) == ["none", "search_r1", "direct"]
    assert rows["direct"]["status"] == "failed"
    assert "exited with status 1" in rows["direct"]["note"]
    for name in ("none", "search_r1"):
        row = rows[name]
        results = json.loads((sweep / name / "results.json").read_text())
        assert (sweep / name / "evaluate.log").exists()
        assert results["config"]["baseline"]["kind"] == "none"
        assert row["status"] == "finished" and row["questions"] == 2
        hotpotqa = results["datasets"]["hotpotqa"]
        cells = row["datasets"]["hotpotqa"]
        for key in ("em", "f1", "recall"):
            interval = hotpotqa["ci"][key]
            assert cells[key] == {"value": hotpotqa[key], "ci": [interval["low"], interval["high"]]}
        assert cells["jd"] == {"value": "not computed", "ci": None}
        assert cells["wall_time_s"] == hotpotqa["wall_time_s"]
        assert row["wall_time_s"] == results["overall"]["pooled"]["wall_time_s"]
        assert row["macro"]["em"]["value"] == results["overall"]["macro"]["em"]["mean"]
    assert rows["none"]["datasets"]["hotpotqa"]["recall"]["value"] > 0  # it searched
    assert rows["search_r1"]["datasets"]["hotpotqa"]["recall"]["value"] == 0  # no such tools
    assert table["provenance"]["policy"] == {"kind": "scripted", "scripted_reads": 2}
    assert table["provenance"]["differs"] == {}
    markdown = (sweep / "table.md").read_text()
    assert "- policy (every baseline's backend): kind=scripted, scripted_reads=2" in markdown
    assert "| direct answer (`direct`) | failed |" in markdown
    assert "| direct answer (`direct`) | — | — | — | — | — |" in markdown

    finished = (sweep / "none" / "results.json").stat().st_mtime_ns
    again = run([*command, "baselines=[none,search_r1]"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("skipped") == 2
    assert (sweep / "none" / "results.json").stat().st_mtime_ns == finished
    table = json.loads((sweep / "table.json").read_text())
    assert table["complete"] is True
    assert [r["status"] for r in table["rows"]] == ["finished", "finished"]

    # table_only: the table rebuilt from the folders as they are, nothing evaluated.
    logs = {name: (sweep / name / "evaluate.log").read_text() for name in ("none", "direct")}
    pairs = "paired=[[none,search_r1],[none,direct]]"
    rebuilt = run([*command, "baselines=[direct,none,search_r1]", pairs, "table_only=true"])
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert {name: (sweep / name / "evaluate.log").read_text() for name in logs} == logs
    table = json.loads((sweep / "table.json").read_text())
    assert [r["status"] for r in table["rows"]] == ["finished", "finished", "failed"]
    searched, failed = table["paired"]
    assert searched["pooled"]["recall"]["difference"] == pytest.approx(
        rows["none"]["pooled"]["recall"]["value"] - rows["search_r1"]["pooled"]["recall"]["value"]
    )
    assert failed["note"] == "not compared: direct not a finished row of this table"
    assert "## paired differences (pooled)" in rebuilt.stdout


def test_a_judge_added_after_the_sweep_judges_its_answers_without_rolling_out_again(
    sweep, judge_server
):
    command = [*sweep_command(sweep), "baselines=[none]"]
    first = run(command)
    assert first.returncode == 0, first.stderr[-3000:]
    trajectories = sweep / "none" / "hotpotqa" / "trajectories.jsonl"
    rolled_out = trajectories.read_text()
    row = json.loads((sweep / "table.json").read_text())["rows"][0]
    assert row["datasets"]["hotpotqa"]["jd"] == {"value": "not computed", "ci": None}

    judged = run(
        [
            *command,
            "judge=openai",
            f"judge.base_url={judge_server.url}",
            "judge.served_model=stub-judge",
        ]
    )
    assert judged.returncode == 0, judged.stderr[-3000:]
    assert "skipped" not in judged.stdout  # another judge: the evaluation is not finished
    assert trajectories.read_text() == rolled_out
    results = json.loads((sweep / "none" / "results.json").read_text())
    hotpotqa = results["datasets"]["hotpotqa"]
    assert hotpotqa["questions_rolled_out"] == 0
    answers = [json.loads(line)["answer"] for line in rolled_out.splitlines()]
    assert len(judge_server.bodies) == len(answers) == 2
    assert isinstance(hotpotqa["jd"], float)
    row = json.loads((sweep / "table.json").read_text())["rows"][0]
    assert row["datasets"]["hotpotqa"]["jd"]["value"] == hotpotqa["jd"]
    assert row["datasets"]["hotpotqa"]["wall_time_s"] == hotpotqa["wall_time_s"] > 0
    table = json.loads((sweep / "table.json").read_text())
    assert table["provenance"]["judge"]["kind"] == "openai"
