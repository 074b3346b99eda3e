"""Benchmark one experiment's GRPO step, part by part, against its raw model costs.

    python scripts/bench_train_step.py                                 # experiment=cpu_grasp
    python scripts/bench_train_step.py experiment=cpu_learn out=runs/step-cpu_learn.json
    python scripts/bench_train_step.py experiment=cpu_grasp model.name=runs/cpu_grasp/warm_start/model

Builds the run exactly as scripts/train.py does (same index, environment, rollout engine,
reward and TRL GRPOTrainer) and runs ``warmup_steps`` + ``timed_steps`` steps with
``grasp.train.step_profile.StepProfiler`` attached: each step's wall time split into
generation, environment, no-grad log-probabilities (reference and old policy), forward,
backward, optimizer and the rest, with the tokens it processed (prompt, generated, inserted).
Then, in the same process and on the last step's trajectories: one raw ``model.generate`` of
the same rows and new-token count, and one forward/backward over the same sequences, the floors
the step's generation and update are measured against. No warm start and no evaluation run;
``model.name=`` points at a warm-started model to time realistic episodes. Prints a table and
writes JSON (machine facts included: time only on idle cores).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from grasp.bench import machine, write_report
from grasp.config import BenchTrainStepConfig, register_configs, to_dataclass
from grasp.threads import set_threads
from grasp.train.process import set_process_environment
from grasp.train.step_profile import PARTS, StepProfiler, mean_timing
from grasp.train.trainer import build_training, make_grpo_trainer
from grasp.train.warm_start import WarmStartSettings

log = logging.getLogger("bench_train_step")
register_configs()


def raw_references(trainer, batch, bf16: bool) -> dict[str, float]:
    """Raw model.generate of the batch's rows, and one forward/backward over its sequences."""
    import torch

    model = trainer.accelerator.unwrap_model(trainer.model)
    traces = [t.tokens for t in batch.trajectories]
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


@hydra.main(version_base=None, config_path="../configs", config_name="bench_train_step")
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BenchTrainStepConfig)
    set_threads(config.threads)
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
    run_dir = Path(config.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    set_process_environment(config.wandb, run_dir)
    setup = build_training(config)
    trainer = make_grpo_trainer(config, setup.data, setup.env, setup.loaded, setup.chat, run_dir)
    profiler = StepProfiler().attach(trainer)
    trainer.train()
    timed = profiler.steps[config.warmup_steps :]
    summary = mean_timing(timed)
    report = {
        "experiment": config.experiment,
        "config": OmegaConf.to_container(cfg, resolve=True),
        "step": summary,
        "steps": [s.to_json() for s in profiler.steps],
    }
    if config.references:
        report["raw"] = raw_references(trainer, profiler.last_batch, config.grpo.bf16)
    report["environment"] = machine(load_before)
    path = write_report(report, config.out, f"bench_train_step-{config.experiment}.json")
    print_table(summary, report.get("raw"))
    log.info("wrote %s", path)


def print_table(summary: dict, raw: dict | None) -> None:
    parts, tokens = summary["parts_s"], summary["tokens"]
    print(f"\nGRPO step, mean of {summary['steps']} timed steps")
    print(f"{'part':<18}{'seconds':>10}{'share':>8}")
    for part in (*PARTS, "other"):
        print(f"{part:<18}{parts[part]:>10.2f}{parts[part] / summary['wall_s']:>8.1%}")
    print(f"{'step':<18}{summary['wall_s']:>10.2f}")
    print(
        f"samples/step {summary['samples_per_step']:.0f}, samples/minute "
        f"{summary['samples_per_minute']:.2f}; tokens/step: prompt {tokens['prompt']:.0f}, "
        f"generated {tokens['generated']:.0f}, inserted {tokens['inserted']:.0f}, "
        f"turns {tokens['turns']:.1f}"
    )
    if raw:
        print(
            f"raw model.generate of {raw['generate_rows']} rows x "
            f"{raw['generate_new_tokens_per_row']} tokens: {raw['generate_s']:.2f} s; "
            f"one forward/backward over {raw['sequence_tokens']} tokens: "
            f"{raw['forward_s']:.2f} + {raw['backward_s']:.2f} s"
        )


if __name__ == "__main__":
    main()
