"""The GRPO step benchmark: one experiment's step, part by part, against its raw model costs.

``run_benchmark(config, resolved)`` builds the run as scripts/train.py does, runs
``warmup_steps`` + ``timed_steps`` steps under ``StepProfiler`` once per arm (each value of
``reuse_cache``: every turn prefilled whole, or continuing the episode's KV cache) and times
the raw floors (``raw_references``); ``table(report)`` is its printed table, the arms side by
side.
``scripts/bench_train_step.py`` is the entry point.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from grasp.bench.config import BenchTrainStepConfig
from grasp.bench.report import machine
from grasp.train.step_profile import PARTS, StepProfiler, mean_timing
from grasp.train.trainer import build_training, make_grpo_trainer
from grasp.train.warm_start import WarmStartSettings


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


def run_benchmark(config: BenchTrainStepConfig, resolved: dict[str, Any]) -> dict[str, Any]:
    """Train ``warmup_steps`` + ``timed_steps`` steps (no warm start, no evaluation) with the
    profiler attached, once per value of ``config.reuse_cache`` (each arm from the same
    untrained weights, seed and questions); the JSON report, ``resolved`` the composed
    config as it was given."""
    load_before = os.getloadavg()
    steps = config.warmup_steps + config.timed_steps
    config = replace(
        config,
        grpo=replace(config.grpo, max_steps=steps),
        warm_start=WarmStartSettings(enabled=False),
        eval_before=False,
        trajectories_every=0,
        save_every=10**6,
    )
    setup = build_training(config)
    # Each arm trains its own copy of the untrained model (the trainer wraps and updates it).
    pristine = copy.deepcopy(setup.loaded.model) if len(config.reuse_cache) > 1 else None
    arms, last = [], None
    for number, reuse_cache in enumerate(config.reuse_cache):
        arm = replace(config, grpo=replace(config.grpo, reuse_cache=reuse_cache))
        loaded = setup.loaded
        if number > 0 and pristine is not None:
            loaded = replace(loaded, model=copy.deepcopy(pristine))
        run_dir = Path(config.run_dir) / f"reuse_cache-{str(reuse_cache).lower()}"
        run_dir.mkdir(parents=True, exist_ok=True)
        trainer = make_grpo_trainer(arm, setup.data, setup.env, loaded, setup.chat, run_dir)
        profiler = StepProfiler().attach(trainer)
        trainer.train()
        timed = profiler.steps[config.warmup_steps :]
        arms.append(
            {
                "reuse_cache": reuse_cache,
                "step": mean_timing(timed),
                "steps": [s.to_json() for s in profiler.steps],
            }
        )
        last = (trainer, profiler.last_batch)
    report: dict[str, Any] = {"experiment": config.experiment, "config": resolved, "arms": arms}
    if config.references and last is not None:
        report["raw"] = raw_references(*last, config.grpo.bf16)
    report["environment"] = machine(load_before)
    return report


def table(report: dict[str, Any]) -> str:
    """Each arm's mean step by part, with its share, tokens and throughput; the arms side by
    side with their ratio to the first; then the raw floors."""
    arms = report["arms"]
    lines = [
        f"\nGRPO step of {report['experiment']}, mean of {arms[0]['step']['steps']} timed steps"
    ]
    header = "".join(f"{'reuse_cache=' + str(a['reuse_cache']).lower():>20}" for a in arms)
    lines.append(f"{'part (seconds)':<22}{header}")
    for part in (*PARTS, "other"):
        cells = "".join(
            f"{a['step']['parts_s'][part]:>12.2f}{a['step']['parts_s'][part] / a['step']['wall_s']:>8.1%}"
            for a in arms
        )
        lines.append(f"{part:<22}{cells}")
    lines.append(f"{'step':<22}" + "".join(f"{a['step']['wall_s']:>12.2f}{'':>8}" for a in arms))
    for name in ("prompt", "generated", "inserted", "prefilled", "turns"):
        cells = "".join(f"{a['step']['tokens'].get(name, 0):>12.0f}{'':>8}" for a in arms)
        lines.append(f"{'tokens: ' + name:<22}{cells}")
    lines.append(
        f"{'samples/step':<22}"
        + "".join(f"{a['step']['samples_per_step']:>12.0f}{'':>8}" for a in arms)
    )
    first = arms[0]["step"]["samples_per_minute"]
    lines.append(
        f"{'samples/minute':<22}"
        + "".join(
            f"{a['step']['samples_per_minute']:>12.2f}"
            f"{'x' + format(a['step']['samples_per_minute'] / first, '.2f'):>8}"
            for a in arms
        )
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
