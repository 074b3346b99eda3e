"""The adapter benchmark: generation with a run's LoRA adapters merged into the weights
against unmerged.

``run_benchmark(config)`` times greedy generation both ways per prompt length and checks the
tokens agree; ``table(report)`` is its printed table. ``scripts/bench_adapters.py`` is the
entry point.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, TypedDict

from grasp.bench.config import BenchAdaptersConfig
from grasp.bench.report import Machine, machine

log = logging.getLogger("bench_adapters")


def load(config: BenchAdaptersConfig, merge_last: bool) -> Any:
    """The base model with every adapter merged, or with the last one kept as PEFT's."""
    from peft import PeftModel

    from grasp.models import load_policy_model
    from grasp.rollout.adapters import apply_adapters

    model = apply_adapters(load_policy_model(config.model).model, config.adapters[:-1])
    model = PeftModel.from_pretrained(model, config.adapters[-1])
    return (model.merge_and_unload() if merge_last else model).eval()


class AdaptersRow(TypedDict):
    """One prompt length: the best time each way, and how alike the sequences are."""

    prompt_tokens: int
    unmerged_s: float
    merged_s: float
    speedup_merged: float
    identical_sequences_share: float
    all_seconds: dict[str, list[float]]
    """Every repeat's seconds, unmerged and merged."""


class AdaptersReport(TypedDict):
    """The benchmark's JSON report."""

    rows: list[AdaptersRow]
    batch: int
    new_tokens: int
    adapters: list[str]
    environment: Machine


def run_benchmark(config: BenchAdaptersConfig) -> AdaptersReport:
    """Per prompt length: the best of ``repeats`` greedy generations unmerged and merged, and
    the share of identical sequences; the JSON report."""
    import torch

    from grasp.models import load_policy_model

    load_before = os.getloadavg()
    tokenizer = load_policy_model(config.model).tokenizer
    rows: list[AdaptersRow] = []
    for repeat in config.prompt_repeats:
        prompts = [
            " ".join(
                [
                    f"Question {i}: which film did the director of the 19{i:02d} adaptation "
                    "make next?"
                ]
                * repeat
            )
            for i in range(config.batch)
        ]
        encoded = tokenizer(prompts, return_tensors="pt", padding=True)
        seconds: dict[str, list[float]] = {"unmerged": [], "merged": []}
        tokens: dict[str, Any] = {}
        for _ in range(config.repeats):
            for name in seconds:
                model = load(config, merge_last=name == "merged")
                started = time.perf_counter()
                with torch.no_grad():
                    out = model.generate(
                        **encoded,
                        max_new_tokens=config.new_tokens,
                        min_new_tokens=config.new_tokens,
                        do_sample=False,
                        pad_token_id=tokenizer.pad_token_id,
                    )
                seconds[name].append(time.perf_counter() - started)
                tokens.setdefault(name, out)
                log.info(
                    "%d prompt tokens, %s: %.2f s",
                    encoded["input_ids"].shape[1],
                    name,
                    seconds[name][-1],
                )
        same = (tokens["merged"] == tokens["unmerged"]).all(dim=1).float().mean().item()
        unmerged, merged = min(seconds["unmerged"]), min(seconds["merged"])
        rows.append(
            {
                "prompt_tokens": encoded["input_ids"].shape[1],
                "unmerged_s": unmerged,
                "merged_s": merged,
                "speedup_merged": unmerged / merged,
                "identical_sequences_share": same,
                "all_seconds": seconds,
            }
        )
    return {
        "rows": rows,
        "batch": config.batch,
        "new_tokens": config.new_tokens,
        "adapters": config.adapters,
        "environment": machine(load_before),
    }


def table(report: AdaptersReport) -> str:
    """The rows as a Markdown table under the batch and token settings."""
    lines = [
        f"batch {report['batch']}, {report['new_tokens']} new tokens, greedy",
        "",
        "| prompt tokens | unmerged s | merged s | merged speed-up | identical sequences |",
        "|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['prompt_tokens']} | {r['unmerged_s']:.2f} | {r['merged_s']:.2f} | "
            f"{r['speedup_merged']:.2f}x | {r['identical_sequences_share']:.2f} |"
        )
    return "\n".join(lines)
