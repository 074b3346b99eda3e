"""The GRPO step benchmark: one experiment's step, part by part, arm by arm, against its raw
model costs.

``run_benchmark(config, resolved)`` builds the run as scripts/train.py does, once per arm (a
name and the training overrides that make it: ``config.arms``), each in a process of its own
by default so that its peak resident memory is its own; each arm starts from the same weights
(the untrained model, or a finished warm start: ``warm_start_from``), seed and questions and
runs ``warmup_steps`` + ``timed_steps`` steps under ``StepProfiler``. The last arm also times
the raw floors (``raw_references``). ``table(report)`` is its printed table, the arms side by
side with their ratio to the first. ``scripts/bench_train_step.py`` is the entry point.
"""

from __future__ import annotations

import copy
import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from grasp.bench.config import BenchTrainStepConfig
from grasp.bench.report import machine
from grasp.structured import to_dataclass
from grasp.train.step_profile import DETAILS, PARTS, StepProfiler, mean_timing
from grasp.train.trainer import build_training, make_grpo_trainer, warm_start_context
from grasp.train.trl_bridge import GRPOTrainerView
from grasp.train.warm_start import ADAPTER_DIR, DONE_MARKER, warm_start

ARM_MARKER = ".bench_train_step"
"""In each arm's run folder: written by the benchmark, so that a rerun may clear the folder
(a folder without it is refused, never deleted)."""
UPDATE_PARTS = ("logprobs_no_grad", "forward", "backward", "optimizer")
"""The parts of a step that make its update (TRL's loss, backward and optimizer)."""
ROLLOUT_PARTS = ("generation", "environment")
FIXED_ROLLOUTS = "fixed_step_rollouts.pt"
"""In run_dir: the first arm's first ``FIXED_STEPS`` rollouts, which every arm's fixed step
replays."""
FIXED_STEPS = 2
"""Steps of the fixed step: the first from the arms' common weights (the policy is its
reference, so the KL is 0), the second after that step's update (a KL that is not 0, on
tokens the policy itself sampled)."""
FIXED_PRECISIONS = ("bfloat16", "float32")
FIXED_METRICS = ("loss", "grad_norm", "kl")


def raw_references(trainer, batch, bf16: bool) -> dict[str, float]:
    """Raw model.generate of the batch's rows, and one forward/backward over its sequences."""
    import torch

    model = trainer.accelerator.unwrap_model(trainer.model)
    traces = list(batch.traces)
    new_tokens = max(1, round(sum(sum(t.env_mask) for t in traces) / len(traces)))
    width = max(len(t.prompt_ids) for t in traces)
    pad = trainer.processing_class.pad_token_id or 0
    ids = torch.full((len(traces), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, trace in enumerate(traces):
        ids[row, width - len(trace.prompt_ids) :] = torch.tensor(trace.prompt_ids)
        mask[row, width - len(trace.prompt_ids) :] = 1
    model.eval()
    started = time.perf_counter()
    with torch.no_grad():
        model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=True,
            top_k=0,
            pad_token_id=pad,
        )
    generate_s = time.perf_counter() - started
    model.train()
    # The update's floor: the same sequences in the trainer's micro-batches, the loss over the
    # completion tokens only (log-probabilities of the chosen ids, as TRL's loss reads them).
    micro = trainer.args.per_device_train_batch_size
    forward_s = backward_s = 0.0
    for start in range(0, len(traces), micro):
        chunk = traces[start : start + micro]
        width = max(len(t.context_ids) for t in chunk)
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        attention = torch.zeros_like(ids)
        mask = torch.zeros_like(ids)
        for row, trace in enumerate(chunk):
            ids[row, : len(trace.context_ids)] = torch.tensor(trace.context_ids)
            attention[row, : len(trace.context_ids)] = 1
            mask[row, len(trace.prompt_ids) : len(trace.context_ids)] = torch.tensor(trace.env_mask)
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits_BTV = model(input_ids=ids, attention_mask=attention).logits
        chosen = logits_BTV[:, :-1].float().log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
        loss = -(chosen * mask[:, 1:]).sum() / mask.sum().clamp(min=1)
        forward_s += time.perf_counter() - started
        started = time.perf_counter()
        loss.backward()
        backward_s += time.perf_counter() - started
        del logits_BTV, chosen, loss
    model.zero_grad(set_to_none=True)
    return {
        "generate_s": generate_s,
        "generate_rows": len(traces),
        "generate_new_tokens_per_row": new_tokens,
        "forward_s": forward_s,
        "backward_s": backward_s,
        "micro_batch": micro,
        "sequence_tokens": sum(len(t.context_ids) for t in traces),
    }


def arm_config(config: BenchTrainStepConfig, overrides: list[str]) -> BenchTrainStepConfig:
    """``config`` with an arm's dotted overrides applied (checked as the command line's are)."""
    if not overrides:
        return config
    merged = OmegaConf.merge(OmegaConf.structured(config), OmegaConf.from_dotlist(overrides))
    return to_dataclass(merged, BenchTrainStepConfig)


def arm_folder(run_dir: Path, name: str) -> Path:
    """An arm's run folder, cleared of an earlier benchmark's files; a folder the benchmark
    did not make is refused (nothing is deleted)."""
    folder = run_dir / name
    if folder.exists():
        if not (folder / ARM_MARKER).is_file():
            raise FileExistsError(
                f"{folder} exists and was not made by this benchmark: choose another run_dir="
            )
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / ARM_MARKER).write_text("scripts/bench_train_step.py\n")
    return folder


def copy_warm_start(source: Path, run_dir: Path) -> None:
    """Put a finished warm start (its marker and adapter) into ``run_dir``'s warm_start/."""
    if not (source / DONE_MARKER).is_file() or not (source / ADAPTER_DIR).is_dir():
        raise FileNotFoundError(
            f"warm_start_from={source}: not a finished warm start ({DONE_MARKER} and "
            f"{ADAPTER_DIR}/ expected)"
        )
    target = run_dir / "warm_start"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / DONE_MARKER, target / DONE_MARKER)
    shutil.copytree(source / ADAPTER_DIR, target / ADAPTER_DIR)


def run_arm(
    config: BenchTrainStepConfig,
    name: str,
    overrides: list[str],
    references: bool,
    first: bool = True,
) -> dict[str, Any]:
    """Train one arm's steps with the profiler attached, in this process; its JSON. The first
    arm records its first rollout for every arm's fixed step (``fixed_step``)."""
    from grasp.threads import set_threads

    set_threads(config.threads)
    steps = config.warmup_steps + config.timed_steps
    arm = arm_config(config, overrides)
    run_dir = arm_folder(Path(config.run_dir), name)
    arm = replace(
        arm,
        grpo=replace(arm.grpo, max_steps=steps),
        warm_start=replace(arm.warm_start, enabled=False),
        eval_before=False,
        trajectories_every=0,
        save_every=10**6,
        run_dir=str(run_dir),
    )
    setup = build_training(arm)
    if config.warm_start_from:
        copy_warm_start(Path(config.warm_start_from), run_dir)
        settings = replace(arm.warm_start, enabled=True)
        warm = warm_start(settings, warm_start_context(arm, setup), setup.loaded)
        setup = replace(setup, loaded=warm.loaded)
    # The fixed step needs the policy before training wraps and updates it.
    pristine = copy.deepcopy(setup.loaded.model) if config.fixed_step else None
    trainer = make_grpo_trainer(arm, setup.data, setup.env, setup.loaded, setup.chat, run_dir)
    profiler = StepProfiler().attach(trainer)
    if config.fixed_step and first:
        record_first_rollouts(trainer, Path(config.run_dir) / FIXED_ROLLOUTS)
    trainer.train()
    timed = profiler.steps[config.warmup_steps :]
    result: dict[str, Any] = {
        "name": name,
        "overrides": list(overrides),
        "step": mean_timing(timed),
        "steps": [s.to_json() for s in profiler.steps],
        "peak_rss_bytes": profiler.steps[-1].peak_rss,
    }
    if references:
        result["raw"] = raw_references(trainer, profiler.last_batch, arm.grpo.bf16)
    if pristine is not None:
        del trainer, profiler
        result["fixed_step"] = fixed_step(config, arm, replace(setup.loaded, model=pristine), setup)
    return result


def record_first_rollouts(trainer: GRPOTrainerView, path: Path) -> None:
    """Save what the trainer's first ``FIXED_STEPS`` rollouts return (the fixed step replays
    them), as one list."""
    import torch

    rollout = trainer.rollout_func
    recorded: list[dict[str, Any]] = []
    path.unlink(missing_ok=True)

    def recording(prompts: Any, caller: Any) -> dict[str, Any]:
        output = rollout(prompts, caller)
        if len(recorded) < FIXED_STEPS:
            recorded.append(copy.deepcopy(output))
            torch.save(recorded, path)
        return output

    recording.engine = rollout.engine  # type: ignore[attr-defined]  # the profiler's handle
    trainer.rollout_func = recording  # type: ignore[attr-defined]


def fixed_step(
    config: BenchTrainStepConfig, arm: BenchTrainStepConfig, loaded: Any, setup: Any
) -> dict[str, list[dict[str, float]]]:
    """A GRPO step of ``arm``'s code per recorded rollout (``FIXED_STEPS``, or as many as
    the first arm trained), from the same
    weights (the warm start, with ``fixed_step_adapter`` if given), at ``config``'s
    micro-batching, in each of ``FIXED_PRECISIONS``: TRL's logged loss, gradient norm (before
    clipping) and KL of each step. Float32 loads the weights in float32 (no autocast)."""
    import torch

    from grasp.train.metrics_log import read_metrics
    from grasp.train.run_folder import load_final_weights

    path = Path(config.run_dir) / FIXED_ROLLOUTS
    checks = {}
    for precision in FIXED_PRECISIONS:
        recorded = torch.load(path, weights_only=False)  # TRL may change what it is handed
        bf16 = precision == "bfloat16"
        model = copy.deepcopy(loaded.model)
        if not bf16:
            model = model.float()
        run_dir = Path(arm.run_dir) / f"fixed_step-{precision}"
        run_dir.mkdir(parents=True, exist_ok=True)
        step = replace(
            arm,
            grpo=replace(
                arm.grpo,
                bf16=bf16,
                max_steps=len(recorded),
                gradient_accumulation_steps=config.grpo.gradient_accumulation_steps,
            ),
            run_dir=str(run_dir),
        )
        trainer = make_grpo_trainer(
            step, setup.data, setup.env, replace(loaded, model=model), setup.chat, run_dir
        )
        if config.fixed_step_adapter:
            unwrapped = trainer.accelerator.unwrap_model(trainer.model)
            load_final_weights(unwrapped, Path(config.fixed_step_adapter))

        def replay(prompts: Any, caller: Any, recorded: list = recorded) -> dict[str, Any]:
            return recorded[int(caller.state.global_step)]

        trainer.rollout_func = replay
        trainer.train()
        logged = [r for r in read_metrics(run_dir) if "loss" in r and "train_runtime" not in r]
        checks[precision] = [{name: float(r[name]) for name in FIXED_METRICS} for r in logged]
        del trainer, model
    return checks


def run_benchmark(config: BenchTrainStepConfig, resolved: dict[str, Any]) -> dict[str, Any]:
    """Each arm of ``config.arms`` in turn (``run_arm``; in a process of its own with
    ``isolate``); the JSON report, ``resolved`` the composed config as it was given."""
    load_before = os.getloadavg()
    for arm in config.arms:
        arm_config(config, arm.overrides)  # a typo fails here, before any arm runs
    arms = []
    for number, arm in enumerate(config.arms):
        references = config.references and number == len(config.arms) - 1
        call = (config, arm.name, list(arm.overrides), references, number == 0)
        if config.isolate:
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
                arms.append(pool.submit(run_arm, *call).result())
        else:
            arms.append(run_arm(*call))
    report: dict[str, Any] = {"experiment": config.experiment, "config": resolved, "arms": arms}
    raw = arms[-1].pop("raw", None)
    if raw is not None:
        report["raw"] = raw
    report["environment"] = machine(load_before)
    return report


def _relative(check: dict[str, float], first: dict[str, float]) -> str:
    """The largest relative difference of a fixed step's metrics from the first arm's (a
    metric that is 0 in the first arm, as the first step's KL is, counts by its value)."""
    worst = max(
        abs(check[m] - first[m]) / abs(first[m]) if first[m] else abs(check[m])
        for m in FIXED_METRICS
    )
    return f"{worst:.1e}"


def _sum(step: dict[str, Any], parts: tuple[str, ...]) -> float:
    return sum(step["parts_s"][part] for part in parts)


def table(report: dict[str, Any]) -> str:
    """Each arm's mean step by part (with its share) and sub-part, tokens, memory and
    throughput; the arms side by side with their ratio to the first; then the raw floors."""
    arms = report["arms"]
    width = max(20, *(len(a["name"]) + 2 for a in arms))
    lines = [
        f"\nGRPO step of {report['experiment']}, mean of {arms[0]['step']['steps']} timed steps",
        f"{'part (seconds)':<26}" + "".join(f"{a['name']:>{width}}" for a in arms),
    ]

    def row(label: str, values: list[float], share: list[float] | None = None) -> str:
        cells = []
        for number, value in enumerate(values):
            extra = f"{share[number]:>7.1%}" if share else ""
            cells.append(f"{value:>{width - len(extra)}.2f}{extra}")
        return f"{label:<26}" + "".join(cells)

    for part in (*PARTS, "other"):
        values = [a["step"]["parts_s"][part] for a in arms]
        shares = [a["step"]["parts_s"][part] / a["step"]["wall_s"] for a in arms]
        lines.append(row(part, values, shares))
    for name in DETAILS:
        lines.append(row(f"  {name}", [a["step"].get("details_s", {}).get(name, 0) for a in arms]))
    lines.append(row("rollout", [_sum(a["step"], ROLLOUT_PARTS) for a in arms]))
    lines.append(row("update", [_sum(a["step"], UPDATE_PARTS) for a in arms]))
    lines.append(row("step", [a["step"]["wall_s"] for a in arms]))
    for name in ("prompt", "generated", "inserted", "prefilled", "turns"):
        lines.append(row(f"tokens: {name}", [a["step"]["tokens"].get(name, 0) for a in arms]))
    lines.append(row("peak RSS (GB)", [a["peak_rss_bytes"] / 1e9 for a in arms]))
    first = arms[0]["step"]
    for label, measure in (
        ("step speed-up", lambda s: first["wall_s"] / s["wall_s"]),
        ("rollout speed-up", lambda s: _sum(first, ROLLOUT_PARTS) / _sum(s, ROLLOUT_PARTS)),
        ("update speed-up", lambda s: _sum(first, UPDATE_PARTS) / _sum(s, UPDATE_PARTS)),
        ("samples/minute", lambda s: s["samples_per_minute"]),
    ):
        lines.append(row(label, [measure(a["step"]) for a in arms]))
    if all("fixed_step" in a for a in arms):
        for precision in FIXED_PRECISIONS:
            for number in range(FIXED_STEPS):
                checks = [a["fixed_step"][precision][number] for a in arms]
                for metric in FIXED_METRICS:
                    label = f"fixed {precision[:4]} {number + 1}: {metric}"
                    lines.append(
                        f"{label:<26}" + "".join(f"{c[metric]:>{width}.6g}" for c in checks)
                    )
                lines.append(
                    f"{'  relative to the first':<26}"
                    + "".join(f"{_relative(c, checks[0]):>{width}}" for c in checks)
                )
    raw = report.get("raw")
    if raw:
        lines.append(
            f"raw model.generate of {raw['generate_rows']} rows x "
            f"{raw['generate_new_tokens_per_row']} tokens: {raw['generate_s']:.2f} s; "
            f"one forward/backward over {raw['sequence_tokens']} tokens: "
            f"{raw['forward_s']:.2f} + {raw['backward_s']:.2f} s"
        )
    return "\n".join(lines)
