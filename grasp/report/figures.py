"""The report's figures, drawn with matplotlib from a loaded run.

Each function returns a ``matplotlib.figure.Figure`` (or None when the run has nothing to
draw) built without pyplot, so it neither needs nor changes a backend: the HTML report
inlines it as SVG (``figure_svg``), a notebook displays it as it is.

    run = load_run(Path("runs/cpu_smoke"))
    reward_figure(run.metrics)
    tool_use_figure(run.metrics, tools=run_tools(run))
    recall_turns_figure(run.evaluations)
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from grasp.report.load import RunData, TrajectorySet, metric_keys, recall_by_turns, series
from grasp.reward import TERM_NAMES
from grasp.train.plots import DEV_PANELS, dev_points, smooth

REWARD_KEYS = ("reward/total", *(f"reward/{name}" for name in TERM_NAMES))
"""The composite reward and its terms, as the rollout logs them each step."""
ERROR_KEYS = ("tools/parse_error_rate", "tools/invalid_call_rate")
"""Shares of turns refused: text that is no tool call, and well-formed calls the env refused."""
TOOL_SUFFIX = "_per_episode"
_SVG_NOISE = re.compile(r"<metadata>.*?</metadata>\s*|\s+xmlns(?::xlink)?=\"[^\"]*\"", re.S)
"""The RDF metadata block and namespace declarations: an HTML parser needs neither, and they
are the only URLs matplotlib writes."""


def _window(steps: int) -> int:
    """The moving-average window of curves.png: a twentieth of the run."""
    return max(1, steps // 20)


def _plot_series(axis: Any, metrics: Sequence[dict[str, Any]], key: str, label: str) -> bool:
    """Raw values (faint when smoothed) and their moving average; False when never logged."""
    line = series(metrics, key)
    if not line.values:
        return False
    window = _window(len(line.values))
    if window == 1:
        axis.plot(line.steps, line.values, marker="o", markersize=3, label=label)
        return True
    (raw,) = axis.plot(line.steps, line.values, linewidth=0.8, alpha=0.3)
    axis.plot(line.steps, smooth(line.values, window), color=raw.get_color(), label=label)
    return True


def _finish(axis: Any, title: str, ylabel: str) -> None:
    axis.set_title(title, fontsize=10)
    axis.set_ylabel(ylabel)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="best")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))


def reward_figure(metrics: Sequence[dict[str, Any]]) -> Figure | None:
    """The reward and each of its terms over training steps."""
    if not metrics:
        return None
    figure = Figure(figsize=(8, 3.6), layout="constrained")
    axis = figure.add_subplot()
    drawn = [k for k in REWARD_KEYS if _plot_series(axis, metrics, k, k.split("/", 1)[1])]
    if not drawn:
        return None
    window = _window(len(metrics))
    smoothed = f" (moving average over {window} steps)" if window > 1 else ""
    _finish(axis, f"reward terms{smoothed}", "mean over the step's episodes")
    axis.set_xlabel("step")
    return figure


def dev_curve_figure(curve: Sequence[dict[str, Any]]) -> Figure | None:
    """The dev learning curve's pooled points: the reward and its terms, recall, read recall
    and the share that answers, and context tokens, at each evaluated step."""
    panels = [
        (t, keys) for t, keys in DEV_PANELS if any(dev_points(list(curve), k)[0] for k in keys)
    ]
    if not panels:
        return None
    figure = Figure(figsize=(8, 2.8 * len(panels)), layout="constrained")
    axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    questions = curve[0]["pooled"].get("episodes")
    for axis, (title, keys) in zip(axes, panels, strict=True):
        for key in keys:
            steps, values = dev_points(list(curve), key)
            if steps:
                axis.plot(steps, values, marker="o", markersize=4, label=key.split("/", 1)[-1])
        _finish(axis, f"{title} ({questions} questions, greedy, pooled)", "mean per episode")
    axes[-1].set_xlabel("step")
    return figure


def tool_keys(metrics: Sequence[dict[str, Any]], tools: Sequence[str] | None = None) -> list[str]:
    """``tools/<name>_per_episode`` keys to draw: the offered tools', else those ever used."""
    keys = metric_keys(metrics, "tools/", TOOL_SUFFIX)
    if tools is not None:
        return [k for k in keys if k.removeprefix("tools/").removesuffix(TOOL_SUFFIX) in tools]
    return [k for k in keys if any(r.get(k) for r in metrics)]


def tool_use_figure(
    metrics: Sequence[dict[str, Any]], tools: Sequence[str] | None = None
) -> Figure | None:
    """Tool calls per episode, and the share of turns that failed to parse or were refused."""
    keys = tool_keys(metrics, tools)
    if not metrics or not keys:
        return None
    figure = Figure(figsize=(8, 5.6), layout="constrained")
    calls, errors = figure.subplots(2, 1, sharex=True)
    for key in keys:
        _plot_series(calls, metrics, key, key.removeprefix("tools/").removesuffix(TOOL_SUFFIX))
    _finish(calls, "tool calls per episode", "calls")
    if any(_plot_series(errors, metrics, k, k.removeprefix("tools/")) for k in ERROR_KEYS):
        _finish(errors, "refused turns", "share of turns")
    errors.set_xlabel("step")
    return figure


def recall_turns_figure(sets: Sequence[TrajectorySet]) -> Figure | None:
    """Mean recall of gold paragraphs by turns used (left) and episodes per turns used (right)."""
    sets = [s for s in sets if s.trajectories]
    if not sets:
        return None
    figure = Figure(figsize=(8, 3.4), layout="constrained")
    recall_axis, count_axis = figure.subplots(1, 2)
    width = 0.8 / len(sets)
    for number, trajectory_set in enumerate(sets):
        rows = recall_by_turns(trajectory_set.trajectories)
        turns = [r.turns_used for r in rows]
        recall_axis.plot(turns, [r.recall for r in rows], marker="o", label=trajectory_set.label)
        offset = (number - (len(sets) - 1) / 2) * width
        count_axis.bar(
            [t + offset for t in turns],
            [r.episodes for r in rows],
            width=width,
            label=trajectory_set.label,
        )
    recall_axis.set_ylim(-0.05, 1.05)
    _finish(recall_axis, "recall by turns used", "mean recall")
    _finish(count_axis, "episodes by turns used", "episodes")
    for axis in (recall_axis, count_axis):
        axis.set_xlabel("turns used")
    return figure


def run_tools(run: RunData) -> list[str] | None:
    """The tools the run offered (config.json's env.tools), when its config says."""
    env = (run.config or {}).get("env")
    if isinstance(env, dict) and isinstance(env.get("tools"), list):
        return [str(t) for t in env["tools"]]
    return None


def figure_svg(figure: Figure) -> str:
    """The figure as an ``<svg>`` element to inline in HTML: text kept as text, no metadata."""
    buffer = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "grasp-report"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    return _SVG_NOISE.sub("", text[text.index("<svg") :])
