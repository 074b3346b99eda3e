"""scripts/train.py end to end on a tiny model: bad configs fail first, a killed run resumes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException
from tiny_run import tiny_run_overrides

from grasp.paths import REPO_ROOT


def train_command(run_dir: Path, model_dir: Path, questions: Path, index_dir: Path, *extra: str):
    return [
        sys.executable,
        str(REPO_ROOT / "scripts" / "train.py"),
        *tiny_run_overrides(run_dir, model_dir, questions, index_dir),
        "grpo.questions_per_step=1",
        "rollout.sampling.max_new_tokens=8",
        "eval_questions=2",
        "trajectory_questions=1",
        *extra,
    ]


def run(command: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


BAD_CONFIGURATIONS = [
    ("experiment=no_such_experiment", MissingConfigException, "no_such_experiment"),
    ("model.name=/no/such/model", FileNotFoundError, "model.name"),
    ("env.top_k=100000", ValueError, "env.top_k"),
    ("env.tools=[read_paragraph,answer]", ValueError, "must include a search tool"),
    ("grpo.num_generations=1", ValueError, "grpo.num_generations"),
    ("env.scope=everywhere", ValueError, "env.scope"),
    ("grpo.learning_rat=1", ConfigCompositionException, "learning_rat"),
]


def compose_training(overrides: list[str]) -> tuple[Any, dict[str, Any]]:
    """The TrainConfig and resolved settings scripts/train.py makes of ``overrides``."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from grasp.config import register_configs, to_dataclass
    from grasp.train.config import TrainConfig

    register_configs()
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        cfg = compose("train", overrides=overrides)
    return to_dataclass(cfg, TrainConfig), OmegaConf.to_container(cfg, resolve=True)


def start_training(overrides: list[str]) -> None:
    """What scripts/train.py does with ``overrides`` (one process, in this one)."""
    from grasp.train.process import SingleProcess
    from grasp.train.trainer import run_training

    config, resolved = compose_training(overrides)
    run_training(config, resolved, SingleProcess())


def folder_contents(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes): what a refused run must not touch."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("override", "error", "message"), BAD_CONFIGURATIONS)
def test_bad_configuration_fails_before_any_work(
    tmp_path, tiny_model_dir, tiny_questions_file, override, error, message
):
    command = train_command(
        tmp_path / "run", tiny_model_dir, tiny_questions_file, tmp_path / "index", override
    )
    with pytest.raises(error, match=re.escape(message)):
        start_training(command[2:])
    assert not (tmp_path / "index").exists(), "no index was built"
    # Issue 36 item 1: not even config.json, or the corrected command would be refused.
    assert not (tmp_path / "run").exists(), "nothing was written in the run folder"


def test_a_configuration_refused_after_its_index_is_built_writes_no_run_folder(
    tmp_path, tiny_model_dir, tiny_questions_file
):
    """Issue 36 item 1: the checks that need the index built (the policy model loads) come
    before the run folder's first file too."""
    not_a_model = tmp_path / "no_weights"  # its tokenizer loads, its weights are missing
    shutil.copytree(tiny_model_dir, not_a_model)
    for weights in not_a_model.glob("*.safetensors"):
        weights.unlink()
    command = train_command(tmp_path / "run", not_a_model, tiny_questions_file, tmp_path / "index")
    with pytest.raises(OSError, match=re.escape(str(not_a_model))):
        start_training(command[2:])
    assert (tmp_path / "index" / "manifest.json").is_file(), "refused after the index"
    assert not (tmp_path / "run").exists(), "nothing was written in the run folder"


def test_a_dev_curve_refusal_comes_before_the_index_and_the_run_folder(
    tmp_path, tiny_model_dir, tiny_questions
):
    """Issue 36 item 1, for the dev curve: its questions must be held out, and that is checked
    with the other checks, not after config.json (then the corrected command was refused)."""
    import dataclasses

    from grasp.data import write_normalized
    from grasp.train.config import DevCurveSettings
    from grasp.train.dev_curve import dev_questions

    curve = DevCurveSettings(every=1, questions_per_dataset=2, datasets=["hotpotqa"])
    held_out = dev_questions(curve, training=[])["hotpotqa"][0][0]
    # Copies under new ids: the smoke split puts some of them in the training half.
    leaked = [dataclasses.replace(held_out, question_id=f"leak-{i}") for i in range(8)]
    questions = write_normalized([*tiny_questions, *leaked], tmp_path / "dev.jsonl")
    command = train_command(
        tmp_path / "run",
        tiny_model_dir,
        questions,
        tmp_path / "index",
        "dev_curve.every=1",
        "dev_curve.questions_per_dataset=2",
        "dev_curve.datasets=[hotpotqa]",
    )
    with pytest.raises(ValueError, match="dev_curve: 1 hotpotqa dev questions are also training"):
        start_training(command[2:])
    assert not (tmp_path / "index").exists(), "no index was built"
    assert not (tmp_path / "run").exists(), "nothing was written in the run folder"


def fake_run(run_dir: Path, overrides: list[str], checkpoints, results_steps) -> None:
    """A run folder as training leaves it (config.json of ``overrides``, complete checkpoints
    at ``checkpoints``, results.json of ``results_steps`` unless None), without the weights."""
    _, resolved = compose_training(overrides)
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(resolved, indent=2, default=str))
    for step in checkpoints:
        folder = run_dir / "checkpoints" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if results_steps is not None:
        (run_dir / "results.json").write_text(json.dumps({"steps": results_steps}))


@pytest.mark.parametrize(
    ("checkpoints", "results_steps", "source"),
    [
        ((2, 4), 4, "checkpoints/checkpoint-4"),
        ((3,), 4, "results.json"),  # saved every 3 steps: the last step is in results.json only
        ((2, 4), None, "checkpoints/checkpoint-4"),  # killed after its checkpoint at step 4
    ],
)
def test_lowering_max_steps_below_the_trained_steps_is_refused_writing_nothing(
    tmp_path, tiny_model_dir, tiny_questions_file, checkpoints, results_steps, source
):
    """Issue 36 item 2: a run trained to step 4 rerun with grpo.max_steps=3 is refused naming
    both, before any work; config.json keeps saying 4."""
    run_dir = tmp_path / "run"

    def overrides(steps: int) -> list[str]:
        command = train_command(
            run_dir,
            tiny_model_dir,
            tiny_questions_file,
            tmp_path / "index",
            f"grpo.max_steps={steps}",
        )
        return command[2:]

    fake_run(run_dir, overrides(4), checkpoints, results_steps)
    before = folder_contents(run_dir)
    message = (
        f"{run_dir} holds a run trained to step 4 ({run_dir / source}), more than grpo.max_steps=3"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        start_training(overrides(3))
    assert folder_contents(run_dir) == before, "the run folder is untouched"
    assert not (tmp_path / "index").exists(), "no index was built"


def test_a_run_resumes_with_another_run_dir_and_refuses_other_differences(tmp_path):
    """Issue 36 item 3: a run folder moved or copied (another clone, another machine) records
    its old run_dir; that is no difference, any other still is."""
    from grasp.train.resume import check_same_run, evaluation_fingerprint

    recorded = {"run_dir": "runs/old", "env": {"top_k": 5}, "grpo": {"max_steps": 4}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(recorded))
    moved = {**recorded, "run_dir": str(tmp_path)}
    check_same_run(path, moved)
    check_same_run(path, {**moved, "grpo": {"max_steps": 6}})
    changed = {**moved, "env": {"top_k": 2}}
    with pytest.raises(ValueError, match=re.escape("(differs in ['env.top_k'])")):
        check_same_run(path, changed)
    assert path.read_text() == json.dumps(recorded), "a check writes nothing"
    # Nor does an evaluation of the run depend on where the run folder is.
    assert "run_dir" not in evaluation_fingerprint(moved)


def test_the_script_exits_non_zero_naming_a_mistyped_field(
    tmp_path, tiny_model_dir, tiny_questions_file
):
    """The same check through the command line (one case: each launch imports torch anew)."""
    result = run(
        train_command(
            tmp_path / "run",
            tiny_model_dir,
            tiny_questions_file,
            tmp_path / "index",
            "grpo.learning_rat=1",
        ),
        timeout=120,
    )
    assert result.returncode != 0
    assert "learning_rat" in result.stdout + result.stderr
    assert not (tmp_path / "index").exists(), "no index was built"


def test_a_killed_run_resumes_without_losing_or_repeating_steps(
    tmp_path, tiny_model_dir, tiny_questions_file
):
    run_dir, index_dir = tmp_path / "run", tmp_path / "index"
    command = train_command(
        run_dir,
        tiny_model_dir,
        tiny_questions_file,
        index_dir,
        "grpo.max_steps=6",
        "save_every=2",
        "trajectories_every=3",
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    deadline = time.monotonic() + 600
    checkpoint = run_dir / "checkpoints" / "checkpoint-2"
    while not (checkpoint / "trainer_state.json").exists():
        assert process.poll() is None, "the run ended before its first checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (run_dir / "results.json").exists(), "killed before the end"

    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    state = json.loads(
        (run_dir / "checkpoints" / "checkpoint-6" / "trainer_state.json").read_text()
    )
    steps = [h["step"] for h in state["log_history"] if "loss" in h]
    assert steps == [1, 2, 3, 4, 5, 6]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["steps"] == 6
    assert "before" in results and "after" in results
    head = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    assert results["code"]["git_commit"] == (head.stdout.strip() or None)
    assert (run_dir / "trajectories" / "step_000006.jsonl").exists()
    assert (run_dir / "curves.png").exists()

    changed = train_command(
        run_dir, tiny_model_dir, tiny_questions_file, index_dir, "grpo.max_steps=6", "env.top_k=2"
    )
    refused = run(changed, timeout=120)
    assert refused.returncode != 0 and "another configuration" in refused.stderr


def _right_or_wrong(request):
    """Per group of four: samples 0 and 1 answer right, 2 and 3 wrong, so every group has
    reward spread and every step a gradient."""
    from grasp.rollout.scripted import tool_call_text

    question_id, sample = request.request_id.split("#")
    answers = {"q-curie": "polonium and radium", "q-hillary": "Auckland", "q-python": "Google"}
    answer = answers.get(question_id, "no idea") if sample in ("0", "1") else "no idea"
    return tool_call_text("answer", answer=answer)


def test_a_resumed_trainer_replays_the_updates_of_an_unbroken_one(tmp_path, scripted_trainer):
    """Training resumed from checkpoint-2 takes steps 3 and 4 as the training that never
    stopped did: the same rewards, loss, gradient norm and KL, so the weights, AdamW state,
    learning-rate schedule and question order all come back from the checkpoint. (A run
    whose steps have no reward spread would pass this vacuously: here every group has it.)"""
    grpo = {
        "num_generations": 4,
        "questions_per_step": 3,
        "max_steps": 4,
        "beta": 0.04,
        "learning_rate": 1e-3,
        "lr_scheduler_type": "linear",
    }

    def history(trainer) -> dict[int, dict[str, float]]:
        return {h["step"]: h for h in trainer.state.log_history if "loss" in h}

    unbroken = scripted_trainer(tmp_path / "unbroken", _right_or_wrong, **grpo)
    unbroken.args.save_steps = 2
    unbroken.train()
    checkpoint = tmp_path / "unbroken" / "checkpoints" / "checkpoint-2"
    assert (checkpoint / "optimizer.pt").is_file()

    resumed = scripted_trainer(tmp_path / "resumed", _right_or_wrong, **grpo)
    resumed.args.save_steps = 2
    resumed.train(resume_from_checkpoint=str(checkpoint))

    ours, theirs = history(resumed), history(unbroken)
    # Steps 1 and 2 come back with the checkpoint's trainer state; 3 and 4 were trained.
    assert sorted(ours) == sorted(theirs) == [1, 2, 3, 4]
    assert all(theirs[step]["grad_norm"] > 0 for step in (1, 2, 3, 4))
    assert theirs[4]["loss"] != theirs[2]["loss"]  # the weights did move
    for step in (3, 4):
        for key in ("reward", "learning_rate"):
            assert ours[step][key] == theirs[step][key], (step, key)
        # The loss agrees to about 1e-5 (float32 sums of another order); a checkpoint whose
        # AdamW and scheduler state were lost moves step 4's loss by 26%.
        for key in ("loss", "grad_norm", "kl"):
            assert ours[step][key] == pytest.approx(theirs[step][key], rel=1e-3), (step, key)


def test_a_finished_run_trains_no_further_and_training_longer_keeps_the_old_after(
    tmp_path, tiny_model_dir, tiny_questions_file
):
    """Issue 18 items 2 and 8: rerunning a finished run trains nothing; raising max_steps trains
    on and evaluates "after" anew, keeping the earlier evaluation beside it."""
    run_dir, index_dir = tmp_path / "run", tmp_path / "index"

    def train(steps: int) -> None:
        command = train_command(
            run_dir,
            tiny_model_dir,
            tiny_questions_file,
            index_dir,
            f"grpo.max_steps={steps}",
            "save_every=2",
            "trajectories_every=0",
        )
        result = run(command)
        assert result.returncode == 0, result.stderr[-3000:]

    def logged_steps() -> list[int]:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        return sorted({json.loads(line)["step"] for line in lines if '"loss"' in line})

    train(2)
    # Killed after its last checkpoint, before final/ was saved, by a version of the code that
    # had no grpo.dynamic_sampling field: the rerun resumes and trains no step more.
    shutil.rmtree(run_dir / "final")
    recorded = json.loads((run_dir / "config.json").read_text())
    del recorded["grpo"]["dynamic_sampling"]
    (run_dir / "config.json").write_text(json.dumps(recorded))
    train(2)
    assert logged_steps() == [1, 2]
    assert (run_dir / "final").is_dir()
    assert (run_dir / "eval_after" / "model_step.txt").read_text() == "2\n"
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 2
    train(3)
    assert logged_steps() == [1, 2, 3]
    assert (run_dir / "eval_after" / "model_step.txt").read_text() == "3\n"
    assert (run_dir / "eval_after-step2" / "results.json").is_file()
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 3


def test_a_moved_run_continues_in_its_new_folder(tmp_path, tiny_model_dir, tiny_questions_file):
    """Issue 36 item 3: a run folder moved elsewhere (as a copy to another clone or machine
    is) reruns and trains on there, from its checkpoint, evaluating in its own folders."""
    first, moved, index_dir = tmp_path / "first", tmp_path / "elsewhere" / "run", tmp_path / "index"

    def train(run_dir: Path, steps: int) -> None:
        command = train_command(
            run_dir,
            tiny_model_dir,
            tiny_questions_file,
            index_dir,
            f"grpo.max_steps={steps}",
            "save_every=1",
            "trajectories_every=0",
        )
        result = run(command)
        assert result.returncode == 0, result.stderr[-3000:]

    train(first, 1)
    moved.parent.mkdir()
    shutil.move(first, moved)
    # Its evaluation folders as a version of the code wrote them that recorded run_dir there.
    for folder in ("eval_before", "eval_after"):
        recorded = json.loads((moved / folder / "config.json").read_text())
        (moved / folder / "config.json").write_text(json.dumps({**recorded, "run_dir": str(first)}))
    train(moved, 1)  # finished: nothing to do, wherever the folder now is
    assert (moved / "eval_after" / "model_step.txt").read_text() == "1\n"
    train(moved, 2)
    lines = (moved / "metrics.jsonl").read_text().splitlines()
    assert sorted({json.loads(line)["step"] for line in lines if '"loss"' in line}) == [1, 2]
    assert json.loads((moved / "results.json").read_text())["steps"] == 2
    assert json.loads((moved / "config.json").read_text())["run_dir"] == str(moved)
    assert (moved / "eval_after-step1" / "results.json").is_file()
    assert not first.exists()


def test_the_latest_complete_checkpoint_is_chosen_by_step(tmp_path):
    """Issue 14 finding 5 (text order puts 90 after 100) and issue 18 item 7 (a checkpoint
    killed mid-save blocks nothing)."""
    from grasp.train.run_folder import latest_checkpoint

    for step in (90, 100, 110):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if step != 110:  # 110 was killed before its trainer_state.json
            (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (tmp_path / "checkpoint-120").mkdir()
    (tmp_path / "checkpoint-120" / "trainer_state.json").write_text('{"global_st')
    latest = latest_checkpoint(tmp_path)
    assert latest is not None and latest.step == 100
    assert latest.path == tmp_path / "checkpoint-100"
    assert latest_checkpoint(tmp_path / "none") is None
