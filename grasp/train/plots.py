"""Training curves of a run directory, drawn from metrics.jsonl into curves.png.

When the run has a dev learning curve (dev_curve.jsonl), its held-out points are drawn
beside the training curves: the dev reward (under the training reward) over the training
reward's panel, then panels of each dev term, of recall, read recall and the share that
answers, and of context tokens, pooled over the curve's datasets.
"""

from __future__ import annotations

from pathlib import Path

from grasp.env.tools import default_tool_names
from grasp.reward import TERM_NAMES
from grasp.train.metrics_log import read_dev_curve, read_metrics
from grasp.train.run_folder import RunFolder

IMPORTANCE_SAMPLING_METRICS = (
    "sampling/importance_sampling_ratio/min",
    "sampling/importance_sampling_ratio/mean",
    "sampling/importance_sampling_ratio/max",
    "sampling/sampling_logp_difference/mean",
    "sampling/sampling_logp_difference/max",
)
"""What TRL's GRPOTrainer logs about vLLM's sampling against the trainer's log-probabilities
when ``use_vllm`` (with its default importance-sampling correction): the ratio after the
``grpo.vllm_importance_sampling_mode`` cap, over the loss tokens, and |logp_trainer -
logp_vLLM| per token. Names as in trl/trainer/grpo_trainer.py (1.16)."""

PANELS = (
    (
        "reward",
        ("reward/total", *(f"reward/{name}" for name in TERM_NAMES)),
    ),
    # The default tool set's calls (semantic_search, keyword_search, read_paragraph, answer).
    ("tool use per episode", tuple(f"tools/{t}_per_episode" for t in default_tool_names())),
    ("errors", ("tools/parse_error_rate", "tools/invalid_call_rate", "groups/zero_reward_spread")),
    ("optimization", ("loss", "kl")),
    ("policy entropy (mean over completion tokens)", ("entropy",)),
    ("vLLM importance sampling", IMPORTANCE_SAMPLING_METRICS),
)

DEV_PANELS = (
    ("held-out dev: reward", ("reward/total", *(f"reward/{name}" for name in TERM_NAMES))),
    ("held-out dev: evidence and answers", ("recall", "read_recall", "answered")),
    ("held-out dev: context tokens per episode", ("context_tokens",)),
)
"""Panels of the dev curve's pooled values (grasp/train/dev_curve.py names them)."""
DEV_REWARD = "reward/total"
"""The dev value drawn over the training reward's panel."""


def panels_for(records: list[dict]) -> list[tuple[str, tuple[str, ...]]]:
    """The panels with at least one logged value (no importance sampling without vLLM)."""
    return [
        (title, keys)
        for title, keys in PANELS
        if any(r.get(key) is not None for r in records for key in keys)
    ]


def smooth(values: list[float], window: int) -> list[float]:
    """Trailing moving average (window 1 returns the values)."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def dev_points(curve: list[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, pooled values) of ``key`` on the dev curve, where it was written."""
    points = [(line["step"], line["pooled"].get(key)) for line in curve]
    points = [(step, value) for step, value in points if value is not None]
    return [step for step, _ in points], [value for _, value in points]


def plot_run(run_dir: Path, window: int | None = None) -> Path | None:
    """Write ``curves.png`` (one panel per metric family, then the dev curve's); None when
    nothing was logged."""
    records = [r for r in read_metrics(run_dir) if "reward/total" in r]
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = read_dev_curve(run_dir)
    window = window or max(1, len(records) // 20)
    panels = panels_for(records)
    dev_panels = [(t, keys) for t, keys in DEV_PANELS if any(dev_points(curve, k)[0] for k in keys)]
    fig, axes = plt.subplots(
        len(panels) + len(dev_panels),
        1,
        figsize=(8, 3 * (len(panels) + len(dev_panels))),
        sharex=True,
        squeeze=False,
    )
    axes = axes[:, 0]
    steps = [r["step"] for r in records]
    for axis, (title, keys) in zip(axes, panels, strict=False):
        for key in keys:
            values = [r.get(key) for r in records]
            if all(v is None for v in values):
                continue
            points = [(s, v) for s, v in zip(steps, values, strict=True) if v is not None]
            xs = [s for s, _ in points]
            axis.plot(xs, smooth([v for _, v in points], window), label=key.split("/", 1)[-1])
        if title == "reward" and curve:
            xs, ys = dev_points(curve, DEV_REWARD)
            axis.plot(xs, ys, "ko--", markersize=4, label="dev total (held out)")
        axis.set_title(f"{title} (moving average over {window} steps)")
        axis.legend(fontsize=7, loc="best")
        axis.grid(alpha=0.3)
    questions = curve[0]["pooled"].get("episodes") if curve else None
    for axis, (title, keys) in zip(axes[len(panels) :], dev_panels, strict=True):
        for key in keys:
            xs, ys = dev_points(curve, key)
            if xs:
                axis.plot(xs, ys, marker="o", markersize=4, label=key.split("/", 1)[-1])
        axis.set_title(f"{title} ({questions} questions, greedy, pooled)")
        axis.legend(fontsize=7, loc="best")
        axis.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    fig.tight_layout()
    path = RunFolder(run_dir).curves_plot
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
