"""scripts/ablate.py: the sweep's composition (no training), and a real two-variant sweep.

The composition tests compose every variant with Hydra's compose API, exactly as the sweep's
jobs do, and check that it differs from the full run only in what its ablation sets. The
end-to-end test trains the full run and no_read for one step each on the tiny model, reruns
the sweep (both are skipped), fails a variant on purpose and compares what is there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from grasp.config import AblateConfig, register_configs, to_dataclass
from grasp.eval.config_diff import config_differences
from grasp.experiments.ablation import ABLATION_FIELDS, Ablation
from grasp.experiments.sweep import record_failure
from grasp.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "ablate.py"
CONFIG_DIR = str(REPO_ROOT / "configs")
register_configs()

SETS = {
    Ablation.NONE: set(),
    Ablation.NO_READ: {"env.tools", "warm_start.adapt_plans"},
    Ablation.NO_SEMANTIC: {"env.tools", "rollout.reward.beta", "warm_start.adapt_plans"},
    Ablation.NO_KEYWORD: {"env.tools", "rollout.reward.beta", "warm_start.adapt_plans"},
    Ablation.NO_RR: {"rollout.reward.alpha"},
    Ablation.NO_RS: {"rollout.reward.beta"},
}
"""What each configs/ablation file changes, besides the run folder."""
SHARED = (
    "grpo.seed",
    "grpo.max_steps",
    "grpo.questions_per_step",
    "grpo.num_generations",
    "dataset",
    "train_source",
    "eval_questions",
    "model.name",
)


@pytest.fixture(scope="module")
def ablate():
    from grasp.experiments import ablation_sweep

    return ablation_sweep


@pytest.fixture
def hydra_configs():
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        yield


@pytest.mark.parametrize("experiment", ["cpu_smoke", "grasp_qwen2.5_3b"])
def test_variants_differ_from_the_full_run_only_in_their_ablation(
    ablate, hydra_configs, experiment
):
    user = [f"experiment={experiment}", "variants=[no_read]", "sweep_dir=/s", "grpo.max_steps=7"]
    resolved = {
        v: ablate.variant_config(ablate.train_overrides([*user, f"ablation={v}"], f"/s/{v}"))
        for v in Ablation
    }
    full = resolved[Ablation.NONE]
    assert full["run_dir"] == "/s/none" and full["grpo"]["max_steps"] == 7
    for variant, config in resolved.items():
        differences = set(config_differences(config, full))
        expected = SETS[variant] | ({"run_dir"} if variant is not Ablation.NONE else set())
        assert differences == expected, variant
        assert differences - {"run_dir"} <= set(ABLATION_FIELDS)
        flat, flat_full = _flat(config), _flat(full)
        assert all(flat[k] == flat_full[k] for k in SHARED)
    assert "read_paragraph" not in resolved[Ablation.NO_READ]["env"]["tools"]
    assert resolved[Ablation.NO_RR]["rollout"]["reward"]["alpha"] == 0.0


@pytest.mark.parametrize("variant", list(Ablation))
def test_a_variant_composes_as_train_py_composes_it(ablate, hydra_configs, variant):
    """configs/ablate.yaml has train.yaml's defaults: its training fields are the child's."""
    overrides = ["experiment=cpu_learn", f"ablation={variant}"]
    swept = OmegaConf.to_container(compose("ablate", overrides=overrides), resolve=True)
    for name in ablate.SWEEP_FIELDS:
        swept.pop(name)
    swept["run_dir"] = f"runs/ablate/cpu_learn/{variant}"
    assert swept == ablate.variant_config(ablate.train_overrides(overrides, swept["run_dir"]))


def test_the_sweep_is_hydra_config(hydra_configs):
    cfg = compose("ablate", overrides=["ablation=no_rr"], return_hydra_config=True)
    assert cfg.hydra.sweeper.params.ablation == "none,no_read,no_semantic,no_keyword,no_rr,no_rs"
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN"
    assert cfg.hydra.sweep.dir == "runs/ablate/cpu_smoke"
    assert cfg.hydra.sweep.subdir == "no_rr"  # Hydra's job folder is the variant's run folder
    cfg = compose(
        "ablate",
        overrides=["variants=[no_rs,no_read]", "experiment=grasp_qwen2.5_3b"],
        return_hydra_config=True,
    )
    assert cfg.hydra.sweeper.params.ablation == "none,no_read,no_rs"
    assert cfg.hydra.sweep.dir == "runs/ablate/grasp_qwen2.5_3b"
    cfg = compose("ablate", overrides=["compare=only"], return_hydra_config=True)
    assert str(cfg.hydra.mode) == "RunMode.RUN"


def test_unknown_variant_or_compare_mode_is_named(hydra_configs):
    with pytest.raises(ValueError, match="variants='no_such'"):
        to_dataclass(compose("ablate", overrides=["variants=[no_such]"]), AblateConfig)
    with pytest.raises(ValueError, match="compare='later'"):
        to_dataclass(compose("ablate", overrides=["compare=later"]), AblateConfig)


def test_train_overrides_drop_the_sweep_fields_and_set_the_run_folder(ablate):
    task = [
        "ablation=no_read",
        "variants=[no_read,no_rr]",
        "sweep_dir=/s",
        "compare=after",
        "launcher=[accelerate,launch]",
        "grpo.max_steps=2",
    ]
    assert ablate.train_overrides(task, "/s/no_read") == [
        "ablation=no_read",
        "grpo.max_steps=2",
        "run_dir=/s/no_read",
    ]
    with pytest.raises(ValueError, match="run_dir= cannot be set"):
        ablate.train_overrides(["run_dir=/elsewhere"], "/s/none")


def _flat(tree, prefix=""):
    if not isinstance(tree, dict):
        return {prefix[:-1]: tree}
    return {k: v for key, value in tree.items() for k, v in _flat(value, f"{prefix}{key}.").items()}


def sweep_command(sweep: Path, model: Path, questions: Path, index: Path, *extra: str):
    return [
        sys.executable,
        str(SCRIPT),
        "experiment=cpu_smoke",
        "variants=[no_read]",
        f"sweep_dir={sweep}",
        f"model.name={model}",
        "model.dtype=float32",
        "model.chat_template=model",
        f"questions_path={questions}",
        f"index_dir={index}",
        "grpo.lora.enabled=false",
        "grpo.bf16=false",
        "grpo.beta=0",
        "grpo.questions_per_step=1",
        "grpo.max_steps=1",
        "rollout.sampling.max_new_tokens=8",
        "eval_questions=2",
        "eval_before=false",
        "trajectories_every=0",
        *extra,
    ]


def run(command: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_a_two_variant_sweep_trains_skips_records_failures_and_compares(
    tmp_path, tiny_model_dir, tiny_questions_file
):
    sweep = tmp_path / "sweep"
    command = sweep_command(sweep, tiny_model_dir, tiny_questions_file, tmp_path / "index")
    result = run(command)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    configs = {}
    for variant in ("none", "no_read"):
        results = json.loads((sweep / variant / "results.json").read_text())
        assert results["steps"] == 1
        assert (sweep / variant / "train.log").exists()
        configs[variant] = json.loads((sweep / variant / "config.json").read_text())
    assert config_differences(configs["no_read"], configs["none"]) == [
        "env.tools",
        "run_dir",
        "warm_start.adapt_plans",
    ]
    comparison = json.loads((sweep / "comparison.json").read_text())
    assert comparison["complete"] is True
    assert [r["status"] for r in comparison["rows"]] == ["finished", "finished"]
    assert comparison["rows"][1]["mismatch"] == []
    no_read = comparison["rows"][1]["metrics"]
    after = json.loads((sweep / "no_read" / "results.json").read_text())["after"]
    assert no_read["em"]["value"] == after["em"]
    assert (sweep / "comparison.md").exists() and (sweep / "multirun.yaml").exists()

    finished = (sweep / "none" / "results.json").stat().st_mtime_ns
    again = run(command)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("skipped") == 2
    assert (sweep / "none" / "results.json").stat().st_mtime_ns == finished

    # A variant whose training fails is recorded, shown as failed, and fails the sweep.
    failing = [c for c in command if not c.startswith("variants=")]
    failed = run([*failing, "variants=[no_rr]", "launcher=[/bin/false]"])
    assert failed.returncode != 0
    assert "variant no_rr: scripts/train.py exited with status 1" in failed.stdout + failed.stderr
    rows = json.loads((sweep / "comparison.json").read_text())["rows"]
    assert [(r["variant"], r["status"]) for r in rows] == [
        ("none", "finished"),
        ("no_rr", "failed"),
    ]

    only = run([sys.executable, str(SCRIPT), "compare=only", f"sweep_dir={sweep}"])
    assert only.returncode == 0, only.stderr[-3000:]
    assert "| no read_paragraph (`no_read`) | finished | 1 | 2 |" in only.stdout
    assert "| no R_R (alpha=0) (`no_rr`) | failed |" in only.stdout


def test_the_dev_evaluation_runs_evaluate_py_on_the_variants_own_run(
    ablate, hydra_configs, tmp_path
):
    overrides = ["experiment=cpu_grasp", "dev_n=100", "threads=2", f"sweep_dir={tmp_path}"]
    config = to_dataclass(compose("ablate", overrides=overrides), AblateConfig)
    run_dir = tmp_path / "no_read"
    assert ablate.dev_eval_command(config, run_dir) == [
        sys.executable,
        str(REPO_ROOT / "scripts" / "evaluate.py"),
        f"run_dir={run_dir}",
        "n=100",
        "datasets=[hotpotqa,2wikimultihopqa,musique]",
        f"out={run_dir / 'eval_dev'}",
        "threads=2",
    ]
    off = to_dataclass(compose("ablate", overrides=[f"sweep_dir={tmp_path}"]), AblateConfig)
    ablate.evaluate_variant(off, Ablation.NO_READ)  # dev_n=0: nothing runs, nothing is written
    assert not run_dir.exists()


def test_bad_dev_evaluation_settings_are_named(hydra_configs):
    with pytest.raises(ValueError, match="dev_n"):
        to_dataclass(compose("ablate", overrides=["dev_n=-1"]), AblateConfig)
    with pytest.raises(ValueError, match="dev_datasets='trivia'"):
        to_dataclass(compose("ablate", overrides=["dev_datasets=[trivia]"]), AblateConfig)
    with pytest.raises(ValueError, match="lists a dataset twice"):
        to_dataclass(compose("ablate", overrides=["dev_datasets=[musique,musique]"]), AblateConfig)
    with pytest.raises(ValueError, match="needs at least one dataset"):
        to_dataclass(compose("ablate", overrides=["dev_n=5", "dev_datasets=[]"]), AblateConfig)


def test_the_dev_evaluation_command_is_one_evaluate_py_takes(ablate, hydra_configs, tmp_path):
    from grasp.config import EvaluateConfig
    from grasp.experiments.trained import check_overrides

    config = to_dataclass(compose("ablate", overrides=["dev_n=7"]), AblateConfig)
    overrides = ablate.dev_eval_command(config, tmp_path / "none")[2:]
    check_overrides(overrides)  # nothing the trained run fixes
    evaluate = to_dataclass(compose("evaluate", overrides=overrides), EvaluateConfig)
    assert (evaluate.n, evaluate.run_dir, evaluate.out) == (
        7,
        str(tmp_path / "none"),
        str(tmp_path / "none" / "eval_dev"),
    )
    assert [str(d) for d in evaluate.datasets] == ["hotpotqa", "2wikimultihopqa", "musique"]


def test_a_dev_evaluation_of_an_earlier_model_or_other_questions_is_set_aside(
    ablate, hydra_configs, tmp_path
):
    config = to_dataclass(
        compose("ablate", overrides=["dev_n=100", f"sweep_dir={tmp_path}"]), AblateConfig
    )
    run_dir = tmp_path / "none"
    (run_dir / "eval_dev").mkdir(parents=True)
    (run_dir / "results.json").write_text(json.dumps({"steps": 10}))  # trained further
    datasets = ["hotpotqa", "2wikimultihopqa", "musique"]
    earlier = {"n": 100, "datasets": datasets, "steps": 5}
    (run_dir / "eval_dev" / "evaluated.json").write_text(json.dumps(earlier))
    (run_dir / "eval_dev" / "results.json").write_text("{}")
    assert not ablate.dev_eval_done(config, run_dir)
    moved = ablate.set_aside_stale_dev_eval(config, run_dir)
    assert moved == run_dir / "eval_dev-100q-step5" and (moved / "results.json").exists()
    assert not (run_dir / "eval_dev").exists()
    assert ablate.set_aside_stale_dev_eval(config, run_dir) is None  # nothing left to move
    (run_dir / "eval_dev").mkdir()
    current = {"n": 100, "datasets": datasets, "steps": 10}
    (run_dir / "eval_dev" / "evaluated.json").write_text(json.dumps(current))
    assert not ablate.dev_eval_done(config, run_dir)  # started, not finished
    (run_dir / "eval_dev" / "results.json").write_text("{}")
    assert ablate.dev_eval_done(config, run_dir)
    record_failure(run_dir / "eval_dev", "scripts/evaluate.py exited with status 1")
    assert not ablate.dev_eval_done(config, run_dir)  # a later attempt failed: run it again


def test_the_reward_ablations_start_from_the_full_runs_finished_warm_start(
    ablate, hydra_configs, tmp_path
):
    user = ["experiment=cpu_grasp", f"sweep_dir={tmp_path}"]
    resolved = {
        v: ablate.variant_config(
            ablate.train_overrides([*user, f"ablation={v}"], str(tmp_path / str(v)))
        )
        for v in Ablation
    }
    full = tmp_path / "none"
    model = full / "warm_start" / "model"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"warm-started weights")
    (full / "config.json").write_text(json.dumps(resolved[Ablation.NONE], default=str))
    (full / "warm_start" / "warm_start.json").write_text('{"kept": 64}')
    # A folder kept without its weights (as under results/) is not shared, nor one still
    # fine-tuning (no config.json yet, then no marker).
    assert not ablate.share_warm_start(tmp_path, Ablation.NO_RR, resolved[Ablation.NO_RR])
    (model / "config.json").write_text("{}")
    (full / "warm_start" / "warm_start.json").unlink()
    assert not ablate.share_warm_start(tmp_path, Ablation.NO_RR, resolved[Ablation.NO_RR])
    # Without a warm start in the runs, there is nothing to share.
    (full / "warm_start" / "warm_start.json").write_text('{"kept": 64}')
    off = {**resolved[Ablation.NO_RR], "warm_start": {"enabled": False}}
    assert not ablate.share_warm_start(tmp_path, Ablation.NO_RR, off)
    assert not (tmp_path / "no_rr").exists()

    shared = {v for v in Ablation if ablate.share_warm_start(tmp_path, v, resolved[v])}
    assert shared == {Ablation.NO_RR, Ablation.NO_RS}  # the tool ablations play other plans
    for variant, key in ((Ablation.NO_RR, "alpha"), (Ablation.NO_RS, "beta")):
        target = tmp_path / str(variant) / "warm_start"
        assert (target / "model" / "model.safetensors").read_bytes() == b"warm-started weights"
        assert not os.path.samefile(
            target / "model" / "model.safetensors", model / "model.safetensors"
        )
        assert (target / "warm_start.json").read_text() == '{"kept": 64}'
        assert json.loads((target / "shared_from.json").read_text()) == {
            "run_dir": str(full),
            "config_differences": [f"rollout.reward.{key}", "run_dir"],
        }
        assert not target.with_name("warm_start.partial").exists()
    for variant in (Ablation.NO_READ, Ablation.NO_SEMANTIC, Ablation.NO_KEYWORD):
        assert not (tmp_path / str(variant) / "warm_start").exists()
    # Once a variant has a warm start, it is its own: not replaced.
    (tmp_path / "no_rs" / "warm_start" / "warm_start.json").write_text('{"kept": 3}')
    assert not ablate.share_warm_start(tmp_path, Ablation.NO_RS, resolved[Ablation.NO_RS])
    assert (tmp_path / "no_rs" / "warm_start" / "warm_start.json").read_text() == '{"kept": 3}'
