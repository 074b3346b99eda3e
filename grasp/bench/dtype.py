"""The dtype benchmark: float32 against bfloat16 for the CPU path's three kinds of work.

``run_benchmark(config)`` times a matmul, MiniLM encoding and SmolLM2 generation per dtype;
``table(report)`` is its printed table, each cell also as a ratio to the first dtype.
``scripts/bench_dtype.py`` is the entry point.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, TypedDict

from grasp.bench.config import BenchDtypeConfig
from grasp.bench.report import Machine, format_value, machine
from grasp.bench.threads import timed_rate
from grasp.models import ModelConfig, load_policy_model, native_bfloat16, torch_dtype
from grasp.threads import set_threads

log = logging.getLogger("bench_dtype")

METRICS = (
    ("matmul_ms", "matmul ms", False),
    ("encoder_sentences_per_s", "MiniLM sentences/s", True),
    ("generated_tokens_per_s", "SmolLM2 generated tokens/s", True),
)
"""(key, column, higher is better) of each row."""

SENTENCES = [f"Sentence number {i} of the benchmark, about a canal in Ohio." for i in range(64)]
PROMPT = "Which film came out first, Blind Shaft or The Mask Of Fu Manchu? Search, then answer."


def time_generation(model: Any, tokenizer: Any, rows: int, new_tokens: int) -> float:
    """Generated tokens per second of one greedy batch of ``rows`` x ``new_tokens``, after a
    one-token warm-up."""
    import torch

    batch = tokenizer([PROMPT] * rows, return_tensors="pt")
    settings = {"do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    with torch.no_grad():
        model.generate(**batch, max_new_tokens=1, **settings)
        started = time.perf_counter()
        out = model.generate(
            **batch, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **settings
        )
        elapsed = time.perf_counter() - started
    generated = (out.shape[1] - batch["input_ids"].shape[1]) * rows
    return generated / elapsed


class _DtypeTimings(TypedDict):
    dtype: str
    matmul_ms: float
    encoder_sentences_per_s: float
    generated_tokens_per_s: float


class DtypeRow(_DtypeTimings, total=False):
    """The three timings in one dtype, and each as a ratio to the reference dtype's."""

    vs_reference: dict[str, float]
    """Added once every row is measured (``run_benchmark``)."""


class DtypeSettings(TypedDict):
    """The benchmark's settings, as the report records them (``BenchDtypeConfig``'s)."""

    matmul_size: int
    """The square matmul's side."""
    sentences: int
    """Sentences the encoder embeds."""
    generate_rows: int
    """Rows generated at once."""
    new_tokens: int
    """Tokens generated per row."""
    model: str
    """The policy model."""
    encoder: str
    """The sentence encoder."""


class DtypeReport(TypedDict):
    """The benchmark's JSON report."""

    rows: list[DtypeRow]
    reference_dtype: str
    native_bfloat16: bool
    cpu_capability: str
    settings: DtypeSettings
    environment: Machine


def measure(config: BenchDtypeConfig, name: str) -> DtypeRow:
    """One row: the three timings in dtype ``name``."""
    import torch
    from sentence_transformers import SentenceTransformer

    from grasp.corpus.encoder import resolve_model_path

    dtype = torch_dtype(name)
    size = config.matmul_size
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    matmul_s = 1.0 / timed_rate(lambda: a @ b, config.seconds)
    encoder = SentenceTransformer(
        resolve_model_path(config.encoder), device="cpu", model_kwargs={"dtype": dtype}
    )
    encode = lambda: encoder.encode(SENTENCES, batch_size=len(SENTENCES))  # noqa: E731
    sentences_per_s = timed_rate(encode, config.seconds) * len(SENTENCES)
    loaded = load_policy_model(ModelConfig(name=config.model, dtype=name))
    tokens_per_s = time_generation(
        loaded.model, loaded.tokenizer, config.generate_rows, config.new_tokens
    )
    return {
        "dtype": name,
        "matmul_ms": matmul_s * 1000,
        "encoder_sentences_per_s": sentences_per_s,
        "generated_tokens_per_s": tokens_per_s,
    }


def run_benchmark(config: BenchDtypeConfig) -> DtypeReport:
    """A row per dtype, and each row's ratio to the first; the JSON report."""
    import torch

    load_before = os.getloadavg()
    set_threads(config.threads)
    rows = []
    for name in config.dtypes:
        row = measure(config, name)
        rows.append(row)
        log.info("%s", row)
    reference = rows[0]
    for row in rows:
        row["vs_reference"] = {key: row[key] / reference[key] for key, _, _ in METRICS}
    return {
        "rows": rows,
        "reference_dtype": reference["dtype"],
        "native_bfloat16": native_bfloat16(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "settings": {
            "matmul_size": config.matmul_size,
            "sentences": len(SENTENCES),
            "generate_rows": config.generate_rows,
            "new_tokens": config.new_tokens,
            "model": config.model,
            "encoder": config.encoder,
        },
        "environment": machine(load_before),
    }


def table(report: DtypeReport) -> str:
    """The rows as a Markdown table, each value also relative to the reference dtype."""
    reference = report["reference_dtype"]
    head = " | ".join(f"{column} | x {reference}" for _, column, _ in METRICS)
    lines = [
        f"native bfloat16: {report['native_bfloat16']} (torch CPU capability "
        f"{report['cpu_capability']})",
        "",
        f"| dtype | {head} |",
        "|---|" + "---|---|" * len(METRICS),
    ]
    for row in report["rows"]:
        cells = " | ".join(
            f"{format_value(row[key])} | {row['vs_reference'][key]:.2f}" for key, _, _ in METRICS
        )
        lines.append(f"| {row['dtype']} | {cells} |")
    return "\n".join(lines)
