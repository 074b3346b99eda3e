"""The rollout benchmark: HFPolicy's two decoders against a plain ``model.generate``, part by part.

``run_benchmark(config)`` builds a random Llama-shaped model in the process (or the model of an
HF ``config.json``, e.g. gpu_check's Qwen2.5-3B), and for each batch size generates the same
left-padded batch three ways, side by side:

- ``before``: ``HFPolicy(decoder="generate")``, ``generate``'s own loop with ``ChosenLogprobs``
  (the path gpu_check's ``rollout_hf`` phase measured);
- ``after``: ``HFPolicy(decoder="loop")``, ``LoopDecoder`` (grasp/rollout/hf_decode.py);
- ``plain``: ``model.generate`` of the same batch and settings, with no log-probabilities (the
  floor).

Each is seeded alike, so all three draw the same ids (the report checks it, and the largest
log-probability difference between ``before`` and ``after``). Per run: wall seconds, generated
tokens and tokens/s; the parts (``PartTimer``): prefill, decode forwards, log-probabilities and
the rest (sampling, stop checks, batch assembly, host copies, Python); memory: on CUDA the peak
allocated and reserved and both after every forward (a reserved curve climbing while
allocated stays flat is allocator fragmentation); on the CPU the process RSS after every forward.
On CUDA the parts come from a second run that synchronizes at every boundary (the first, timed
run overlaps host and device). ``speedup["X_vs_Y"]`` is Y's seconds over X's (above 1: X is
faster). ``table(report)`` prints it; ``scripts/bench_rollout.py`` is the entry point.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

import torch

from grasp.bench.report import Machine, format_value, machine
from grasp.rollout.hf_decode import PARTS, PartTimer, forward_timing
from grasp.rollout.hf_policy import HFPolicy
from grasp.rollout.policy import Generation, GenerationRequest, SamplingConfig

log = logging.getLogger("bench_rollout")

VARIANTS = {"before": "generate", "after": "loop", "plain": None}
"""Each variant's HFPolicy decoder (None: a plain ``model.generate``)."""
CONTENDED_LOAD = 1.2
"""A 1-minute load average above this (on this project's 2-core machine), not counting the
benchmark's own threads, means the timings were taken while other processes ran."""
MEMORY_POINTS = 32
"""Per-step memory samples kept in the report (evenly spaced, the last one included)."""


@dataclass
class BenchRolloutConfig:
    """scripts/bench_rollout.py: HFPolicy's decoders against a plain ``model.generate``."""

    batches: list[int] = field(default_factory=lambda: [16, 64])
    """Episodes per ``HFPolicy.generate`` call, each measured."""
    context: int = 512
    """Context tokens of the longest request."""
    ragged: bool = True
    """Spread the requests' lengths over [context / 2, context] (left padding, as in rollouts);
    False: every request has ``context`` tokens (gpu_check's workload)."""
    new_tokens: int = 64
    """Tokens generated per request (unless it stops first)."""
    temperature: float = 1.0
    """Sampling temperature; 0 is greedy."""
    top_p: float = 1.0
    """Nucleus mass."""
    seed: int = 0
    """Sampling seed, the same for every variant."""
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    """What is timed, in this order (``before``, ``after``, ``plain``)."""
    repeats: int = 1
    """Timed runs per variant and batch (the median is reported), after one small warm-up."""
    model_config: str | None = None
    """An HF ``config.json`` to build the random model from (e.g.
    configs/gpu_check/qwen2.5_3b_config.json); None: a Llama of the sizes below."""
    hidden_size: int = 256
    """Width of the random Llama."""
    layers: int = 4
    """Its decoder layers."""
    heads: int = 4
    """Its attention heads."""
    kv_heads: int = 2
    """Its key-value heads (grouped-query attention, as in SmolLM2 and Qwen2.5)."""
    intermediate_size: int = 688
    """Its MLP width."""
    vocab_size: int = 49152
    """SmolLM2's vocabulary: the per-step [rows, vocabulary] work is realistic."""
    dtype: str = "auto"
    """``auto``: bfloat16 on CUDA, float32 on the CPU."""
    device: str = "auto"
    """``auto``: CUDA when available."""
    threads: int = 0
    """torch threads; 0: every core the process may run on (grasp/threads.py)."""
    dry_run: bool = False
    """Tiny sizes that run in seconds (the test's)."""
    out: str | None = None
    """JSON output path; default runs/bench_rollout.json."""

    def __post_init__(self) -> None:
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown or not self.variants:
            raise ValueError(f"variants must be some of {list(VARIANTS)}, got {self.variants}")
        if not self.batches or min(self.batches) < 1:
            raise ValueError(f"batches must be positive, got {self.batches}")
        for name in ("context", "new_tokens", "repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")


DRY_RUN = {
    "batches": [3],
    "context": 12,
    "new_tokens": 6,
    "hidden_size": 64,
    "layers": 2,
    "heads": 4,
    "kv_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 512,
    "model_config": None,
}


def effective(config: BenchRolloutConfig) -> BenchRolloutConfig:
    """``config`` with the dry run's sizes when ``dry_run``."""
    if not config.dry_run:
        return config
    import dataclasses

    return dataclasses.replace(config, **DRY_RUN)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def build_model(config: BenchRolloutConfig, device: torch.device) -> Any:
    """The random model, in eval mode, on ``device``; its eos is the byte tokenizer's
    ``<|im_end|>`` (258) and its pad ``<|endoftext|>`` (256)."""
    from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig

    if config.model_config:
        model_config = AutoConfig.from_pretrained(config.model_config)
    else:
        model_config = LlamaConfig(
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            num_hidden_layers=config.layers,
            num_attention_heads=config.heads,
            num_key_value_heads=config.kv_heads,
            vocab_size=config.vocab_size,
            max_position_embeddings=max(4096, 2 * (config.context + config.new_tokens)),
            tie_word_embeddings=True,
        )
    model_config.update({"eos_token_id": 258, "pad_token_id": 256, "bos_token_id": None})
    if config.dtype == "auto":
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    else:
        dtype = getattr(torch, config.dtype)
    torch.manual_seed(0)
    with device:
        model = AutoModelForCausalLM.from_config(
            model_config, dtype=dtype, attn_implementation="sdpa"
        )
    return model.eval()


def requests_for(config: BenchRolloutConfig, rows: int) -> list[GenerationRequest]:
    """``rows`` requests of random byte ids (lengths spread when ``ragged``), the same for
    every variant."""
    generator = torch.Generator().manual_seed(1000 + rows)
    low = max(1, config.context // 2) if config.ragged else config.context
    lengths = torch.randint(low, config.context + 1, (rows,), generator=generator).tolist()
    return [
        GenerationRequest(
            messages=[],
            token_ids=torch.randint(0, 256, (length,), generator=generator).tolist(),
            max_new_tokens=config.new_tokens,
            request_id=f"q{row}",
        )
        for row, length in enumerate(lengths)
    ]


def plain_generate(
    policy: HFPolicy, requests: list[GenerationRequest], sampling: SamplingConfig
) -> list[Generation]:
    """One ``model.generate`` of the batch HFPolicy would build (longest first, left-padded),
    with the same settings and seed and no log-probabilities; rows cut at their first stop."""
    ordered = sorted(requests, key=lambda r: len(r.token_ids or ()), reverse=True)
    width = max(len(r.token_ids or ()) for r in ordered)
    ids_BT = torch.full((len(ordered), width), policy.pad_id, dtype=torch.long)
    mask_BT = torch.zeros_like(ids_BT)
    for row, request in enumerate(ordered):
        ids = request.token_ids or []
        ids_BT[row, width - len(ids) :] = torch.tensor(ids)
        mask_BT[row, width - len(ids) :] = 1
    sample = sampling.temperature > 0
    settings: dict[str, Any] = {"do_sample": sample, "repetition_penalty": 1.0}
    if sample:
        settings.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
    device = policy.model.device
    with torch.random.fork_rng(devices=policy._rng_devices()):
        torch.manual_seed(sampling.seed)
        sequences = policy.model.generate(
            input_ids=ids_BT.to(device),
            attention_mask=mask_BT.to(device),
            max_new_tokens=sampling.max_new_tokens,
            eos_token_id=policy.stop_ids,
            pad_token_id=policy.pad_id,
            **settings,
        )
    by_id = {}
    for request, ids in zip(ordered, sequences[:, width:].cpu().tolist(), strict=True):
        generation = policy.to_generation(ids, [0.0] * len(ids))
        generation.logprobs = None
        by_id[request.request_id] = generation
    return [by_id[r.request_id] for r in requests]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reset_memory(device: torch.device) -> None:
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _memory_curve(samples: list[tuple[int, int]], device: torch.device) -> list[list[float]]:
    """Up to ``MEMORY_POINTS`` per-forward samples as [forward, first GiB, second GiB]
    (allocated and reserved on CUDA; RSS twice on the CPU)."""
    if not samples:
        return []
    stride = max(1, -(-len(samples) // MEMORY_POINTS))
    picked = [*range(0, len(samples), stride)]
    if picked[-1] != len(samples) - 1:
        picked.append(len(samples) - 1)
    return [[i, round(samples[i][0] / 2**30, 3), round(samples[i][1] / 2**30, 3)] for i in picked]


class MemoryCurve(TypedDict):
    columns: list[str]
    """forward, then two memory figures: allocated and reserved (CUDA), RSS twice (CPU)."""
    points: list[list[float]]


class _VariantTimings(TypedDict):
    seconds: float
    generated_tokens: int
    tokens_per_s: float
    forwards: int
    parts_s: dict[str, float]


class VariantRun(_VariantTimings, total=False):
    """One timed call of a variant; in a batch's report, the median of its repeats."""

    peak_allocated_gib: float
    """On CUDA."""
    peak_reserved_gib: float
    rss_start_gib: float
    """On the CPU."""
    rss_growth_peak_gib: float
    memory_per_forward_gib: MemoryCurve
    """Always, after the memory figures of its device."""
    all_seconds: list[float]
    """Every repeat's seconds (``_median_run``)."""
    parts_from_synchronized_run_s: float
    """On CUDA: the seconds of the run that waited for the device at each part."""


class Agreement(TypedDict):
    """Whether two variants generated the same ids (``compare``)."""

    rows_with_equal_ids: int
    rows: int
    max_abs_logprob_diff: float | None


class _BatchRuns(TypedDict):
    rows: int
    context_tokens: list[int]
    variants: dict[str, VariantRun]
    speedup: dict[str, float]
    equal_to_before: dict[str, Agreement]


class BatchReport(_BatchRuns, total=False):
    """Every variant on one batch."""

    load_average_after: tuple[float, float, float]


class RolloutBenchReport(TypedDict):
    """The benchmark's JSON report."""

    batches: list[BatchReport]
    settings: dict[str, Any]
    contended: bool
    note: str
    environment: Machine


def run_once(
    variant: str,
    model: Any,
    tokenizer: Any,
    requests: list[GenerationRequest],
    sampling: SamplingConfig,
    device: torch.device,
    sync: bool,
) -> tuple[VariantRun, list[Generation]]:
    """One timed call of ``variant``: seconds, tokens, parts, memory; and its generations."""
    decoder = VARIANTS[variant]
    policy = HFPolicy(model, tokenizer, decoder=decoder or "generate")
    timer = PartTimer(device=device, sync=sync)
    _reset_memory(device)
    timer.sample_memory()
    start_memory = timer.memory.pop()
    _sync(device)
    started = time.perf_counter()
    timer.start()
    if decoder is None:
        with forward_timing(model, timer):
            generations = plain_generate(policy, requests, sampling)
    else:
        policy.timer = timer
        generations = policy.generate(requests, sampling)
    timer.lap("other")
    _sync(device)
    seconds = time.perf_counter() - started
    errors = [g.error for g in generations if g.error]
    if errors:
        raise RuntimeError(f"{variant}: {len(errors)} generation errors, first: {errors[0]}")
    tokens = sum(len(g.token_ids or ()) for g in generations)
    result: VariantRun = {  # its memory figures follow, by device
        "seconds": seconds,
        "generated_tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "forwards": timer.forwards,
        "parts_s": dict(timer.seconds),
    }
    if device.type == "cuda":
        result["peak_allocated_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        result["peak_reserved_gib"] = torch.cuda.max_memory_reserved(device) / 2**30
        result["memory_per_forward_gib"] = {
            "columns": ["forward", "allocated", "reserved"],
            "points": _memory_curve(timer.memory, device),
        }
    else:
        peak = max((rss for rss, _ in timer.memory), default=start_memory[0])
        result["rss_start_gib"] = start_memory[0] / 2**30
        result["rss_growth_peak_gib"] = (peak - start_memory[0]) / 2**30
        result["memory_per_forward_gib"] = {
            "columns": ["forward", "rss", "rss"],
            "points": _memory_curve(timer.memory, device),
        }
    return result, generations


def _median_run(runs: list[VariantRun]) -> VariantRun:
    """The run of median seconds, with every run's seconds."""
    ordered = sorted(runs, key=lambda r: r["seconds"])
    chosen = ordered[(len(ordered) - 1) // 2].copy()
    chosen["all_seconds"] = [r["seconds"] for r in runs]
    return chosen


def compare(a: list[Generation], b: list[Generation]) -> Agreement:
    """Whether two variants generated the same ids, and the largest log-probability gap on
    them (None when either has no log-probabilities)."""
    same = [x.token_ids == y.token_ids for x, y in zip(a, b, strict=True)]
    gaps = [
        abs(p - q)
        for x, y in zip(a, b, strict=True)
        if x.token_ids == y.token_ids and x.logprobs and y.logprobs
        for p, q in zip(x.logprobs, y.logprobs, strict=True)
    ]
    return {
        "rows_with_equal_ids": sum(same),
        "rows": len(same),
        "max_abs_logprob_diff": max(gaps) if gaps else None,
    }


def run_batch(
    config: BenchRolloutConfig, model: Any, tokenizer: Any, rows: int, device: torch.device
) -> BatchReport:
    """Every variant on one batch of ``rows`` requests, interleaved over the repeats."""
    requests = requests_for(config, rows)
    sampling = SamplingConfig(
        temperature=config.temperature,
        top_p=config.top_p,
        max_new_tokens=config.new_tokens,
        seed=config.seed,
    )
    runs: dict[str, list[VariantRun]] = {v: [] for v in config.variants}
    outputs: dict[str, list[Generation]] = {}
    for _ in range(config.repeats):
        for variant in config.variants:
            result, generations = run_once(
                variant, model, tokenizer, requests, sampling, device, sync=False
            )
            runs[variant].append(result)
            outputs[variant] = generations
            log.info(
                "batch %d %s: %.2f s, %.1f tokens/s",
                rows,
                variant,
                result["seconds"],
                result["tokens_per_s"],
            )
    variants = {v: _median_run(r) for v, r in runs.items()}
    if device.type == "cuda":
        # The parts of a run that waits for the device at each boundary (the timed run overlaps
        # host and device, so its laps measure the host).
        for variant in config.variants:
            profiled, _ = run_once(variant, model, tokenizer, requests, sampling, device, sync=True)
            variants[variant]["parts_s"] = profiled["parts_s"]
            variants[variant]["parts_from_synchronized_run_s"] = profiled["seconds"]
    report: BatchReport = {
        "rows": rows,
        "context_tokens": [len(r.token_ids or ()) for r in requests],
        "variants": variants,
        "speedup": {},
        "equal_to_before": {},
    }
    if "before" in variants:
        for variant in variants:
            if variant != "before":
                report["speedup"][f"{variant}_vs_before"] = (
                    variants["before"]["seconds"] / variants[variant]["seconds"]
                )
                report["equal_to_before"][variant] = compare(outputs["before"], outputs[variant])
    if "plain" in variants:
        for variant in variants:
            if variant != "plain":
                report["speedup"][f"{variant}_vs_plain"] = (
                    variants["plain"]["seconds"] / variants[variant]["seconds"]
                )
    return report


def run_benchmark(config: BenchRolloutConfig) -> RolloutBenchReport:
    """Every batch size; the JSON report."""
    from grasp.bench.gpu import byte_tokenizer
    from grasp.threads import set_threads

    load_before = os.getloadavg()
    config = effective(config)
    set_threads(config.threads)
    device = resolve_device(config.device)
    model = build_model(config, device)
    tokenizer = byte_tokenizer()
    # Warm-up: kernels, allocator and lazy imports, outside every timed run.
    warm = SamplingConfig(temperature=config.temperature, top_p=config.top_p, max_new_tokens=2)
    for variant in config.variants:
        decoder = VARIANTS[variant] or "generate"
        HFPolicy(model, tokenizer, decoder=decoder).generate(requests_for(config, 2), warm)
    batches = []
    for rows in config.batches:
        batches.append(run_batch(config, model, tokenizer, rows, device))
        batches[-1]["load_average_after"] = os.getloadavg()
    environment = machine(load_before)
    contended = contention(environment, [b["load_average_after"] for b in batches])
    return {
        "batches": batches,
        "settings": {
            **{k: v for k, v in vars(config).items() if k != "out"},
            "device": str(device),
            "dtype": str(next(model.parameters()).dtype),
            "parameters": sum(p.numel() for p in model.parameters()),
            "model_type": model.config.model_type,
        },
        "contended": contended,
        "note": contention_note(contended),
        "environment": environment,
    }


def contention(environment: Machine, during: list[Any]) -> bool:
    """Whether other processes ran: the 1-minute load average above ``CONTENDED_LOAD`` before
    the benchmark, or above it plus the benchmark's own torch threads after a batch or at the
    end (the benchmark itself keeps its threads busy)."""
    loads = environment["load_average_1_5_15_min"]
    own = environment["torch_threads"]
    after = [loads["end"][0], *(load[0] for load in during)]
    return loads["start"][0] > CONTENDED_LOAD or max(after) - own > CONTENDED_LOAD


def contention_note(contended: bool) -> str:
    if contended:
        return (
            "timings taken while other processes ran (1-minute load average above "
            f"{CONTENDED_LOAD} beyond the benchmark's own threads): compare variants within "
            "this run (interleaved), not across runs"
        )
    return (
        f"no other load: 1-minute load average {CONTENDED_LOAD} or below at the start, and at "
        "most the benchmark's own threads plus that after each batch and at the end"
    )


def table(report: RolloutBenchReport) -> str:
    """One Markdown row per batch and variant: seconds, tokens/s, ratios, parts, memory."""
    cuda = report["settings"]["device"].startswith("cuda")
    memory = "peak alloc / reserved GiB" if cuda else "RSS growth GiB"
    lines = [
        f"| rows | variant | s | tokens | tokens/s | x before | x plain | "
        f"{' | '.join(f'{p} s' for p in PARTS)} | {memory} |",
        "|---:|---|---:|---:|---:|---:|---:|" + "---:|" * len(PARTS) + "---:|",
    ]
    for batch in report["batches"]:
        variants = batch["variants"]
        for name, run in variants.items():
            before = variants.get("before", run)["seconds"] / run["seconds"]
            plain = variants.get("plain", run)["seconds"] / run["seconds"]
            parts = " | ".join(format_value(run["parts_s"][p]) for p in PARTS)
            if cuda:
                held = f"{run['peak_allocated_gib']:.2f} / {run['peak_reserved_gib']:.2f}"
            else:
                held = f"{run['rss_growth_peak_gib']:.3f}"
            lines.append(
                f"| {batch['rows']} | {name} | {format_value(run['seconds'])} | "
                f"{run['generated_tokens']} | {format_value(run['tokens_per_s'])} | "
                f"{before:.2f} | {plain:.2f} | {parts} | {held} |"
            )
    lines.append("")
    for batch in report["batches"]:
        for name, same in batch["equal_to_before"].items():
            lines.append(
                f"rows {batch['rows']}: {name} ids equal to before's on "
                f"{same['rows_with_equal_ids']}/{same['rows']} rows, largest log-probability "
                f"difference {same['max_abs_logprob_diff']}"
            )
    lines.append(report["note"])
    return "\n".join(lines)
