"""The report's tables: evaluation results side by side, and the run's key settings.

Rows come from each evaluation's results as their types (``grasp.eval.results``, read by
``grasp.report.load.read_results``); a tool or stop reason one evaluation lacks is shown as 0
(its absence means none). A figure the run did not measure says so ("not recorded"), never 0.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grasp.eval.results import NOT_RECORDED, Interval
from grasp.report.load import EvaluationSummary, RunData, TrajectorySet


@dataclass
class ResultRow:
    """One line of the results table."""

    label: str
    values: list[float | str | None]
    """One per evaluation, None where it has no such figure; a string (such as
    "not recorded") where it says the figure was not measured."""
    intervals: list[Interval | None]
    """95% interval per evaluation, where its results give one."""
    digits: int = 3


@dataclass
class ResultGroup:
    title: str
    rows: list[ResultRow]


def _get(results: dict[str, Any], *path: str) -> Any:
    value: Any = results
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _row(
    results: Sequence[EvaluationSummary],
    label: str,
    value: Callable[[EvaluationSummary], Any],
    interval: Callable[[EvaluationSummary], Interval | None] = lambda r: None,
    digits: int = 3,
) -> ResultRow:
    return ResultRow(label, [value(r) for r in results], [interval(r) for r in results], digits)


def _union(mappings: Sequence[Mapping[str, Any]]) -> list[str]:
    """Keys of any of ``mappings``, in first-seen order."""
    keys: dict[str, None] = {}
    for mapping in mappings:
        keys.update(dict.fromkeys(mapping))
    return list(keys)


def result_groups(results: Sequence[EvaluationSummary]) -> list[ResultGroup]:
    """The results table's rows, grouped; one value per evaluation in each row."""
    answers = [
        _row(results, label, lambda r, k=key: getattr(r, k), lambda r, k=key: r.ci.get(k))
        for label, key in (("EM", "em"), ("F1", "f1"), ("recall", "recall"))
    ]
    answers += [
        _row(results, "recall, all gold found", lambda r: r.recall_all_gold),
        _row(results, "read recall", lambda r: r.read_recall),
    ]
    rewards = [
        _row(results, key, lambda r, k=key: r.reward.get(k), lambda r, k=key: r.reward_ci.get(k))
        for key in _union([r.reward for r in results])
    ]
    tools = [
        _row(results, name, lambda r, k=name: r.tool_calls_per_episode.get(k, 0.0))
        for name in _union([r.tool_calls_per_episode for r in results])
    ]
    tools += [
        _row(results, "parse error rate (per turn)", lambda r: r.parse_error_rate),
        _row(results, "invalid call rate (per turn)", lambda r: r.invalid_call_rate),
    ]
    stops = [
        _row(results, reason, lambda r, k=reason: r.stop_reasons.get(k, 0.0))
        for reason in _union([r.stop_reasons for r in results])
    ]
    cost = [
        _row(results, "turns per episode", lambda r: r.turns_per_episode, digits=2),
        _row(
            results,
            "generated tokens per episode",
            lambda r: r.generated_tokens_per_episode,
            digits=1,
        ),
        _row(results, "prompt tokens per episode", lambda r: r.prompt_tokens_per_episode, digits=1),
        _row(results, "wall time per question (s)", lambda r: r.wall_time_per_question_s, digits=2),
        _row(results, "episodes", lambda r: r.episodes, digits=0),
    ]
    groups = [
        ResultGroup("answers and retrieval", answers),
        ResultGroup("reward", rewards),
        ResultGroup("tool calls per episode, refused turns", tools),
        ResultGroup("stop reasons (share of episodes)", stops),
        ResultGroup("cost", cost),
    ]
    return [g for g in groups if g.rows]


def _cell(value: float | str | None, interval: Interval | None, digits: int) -> str:
    if value is None:
        return "<td></td>"
    if isinstance(value, str):  # "not recorded", "not computed": said, never shown as 0
        return f'<td class="missing">{html.escape(value)}</td>'
    text = f"{float(value):.{digits}f}"
    if interval is not None:
        text += f'<span class="ci">[{interval.low:.{digits}f}, {interval.high:.{digits}f}]</span>'
    return f"<td>{text}</td>"


def _delta(values: Sequence[float | str | None], digits: int) -> str:
    before, after = values
    if not isinstance(before, int | float) or not isinstance(after, int | float):
        return "<td></td>"
    change = float(after) - float(before)
    if change == 0:
        return f"<td>{change:+.{digits}f}</td>"
    css = "delta-pos" if change > 0 else "delta-neg"
    return f'<td class="{css}">{change:+.{digits}f}</td>'


_TOKEN_KEYS = (
    "generated_tokens_per_episode",
    "completion_tokens_per_episode",
    "prompt_tokens_per_episode",
)


def _with_unrecorded_tokens(evaluation: TrajectorySet) -> EvaluationSummary:
    """The evaluation's results, its token counts "not recorded" when no episode counted
    tokens (results.json of older runs wrote 0.0 for them): its trajectories show none, or
    its prompt tokens per episode are 0 (every episode that counts tokens has a prompt; a
    multi-dataset folder has no trajectories of its own to look at)."""
    results = evaluation.results
    assert results is not None  # the table shows evaluations with results only
    trajectories = evaluation.trajectories
    counted_none = trajectories and not any(t.prompt_tokens > 0 for t in trajectories)
    if counted_none or results.prompt_tokens_per_episode == 0:
        results = dataclasses.replace(results, **dict.fromkeys(_TOKEN_KEYS, NOT_RECORDED))
    return results


def results_table(evaluations: Sequence[TrajectorySet]) -> str:
    """The HTML table of ``evaluations`` (each with results), plus after - before for two."""
    results = [_with_unrecorded_tokens(e) for e in evaluations]
    with_delta = len(evaluations) == 2
    head = "".join(f"<th>{html.escape(e.label)}</th>" for e in evaluations)
    if with_delta:
        head += (
            f"<th>{html.escape(evaluations[1].label)} − {html.escape(evaluations[0].label)}</th>"
        )
    columns = len(evaluations) + 1 + with_delta
    body = []
    for group in result_groups(results):
        body.append(
            f'<tr class="group"><td colspan="{columns}">{html.escape(group.title)}</td></tr>'
        )
        for row in group.rows:
            cells = "".join(
                _cell(v, i, row.digits) for v, i in zip(row.values, row.intervals, strict=True)
            )
            if with_delta:
                cells += _delta(row.values, row.digits)
            body.append(f"<tr><td>{html.escape(row.label)}</td>{cells}</tr>")
    return (
        f'<table class="results"><thead><tr><th></th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


FACTS = (
    ("experiment", ("experiment",)),
    ("dataset", ("dataset",)),
    ("dataset", ("dataset", "name")),
    ("split", ("split",)),
    ("evaluation split", ("eval_split",)),
    ("model", ("model", "name")),
    ("policy", ("policy", "kind")),
    ("tools", ("env", "tools")),
    ("top-K", ("env", "top_k")),
    ("turn budget", ("env", "turn_budget")),
    ("GRPO steps (configured)", ("grpo", "max_steps")),
    ("questions per step", ("grpo", "questions_per_step")),
    ("samples per question (G)", ("grpo", "num_generations")),
    ("learning rate", ("grpo", "learning_rate")),
)
"""Settings the overview lists, by their path in config.json (absent ones are skipped)."""


def config_facts(run: RunData) -> list[tuple[str, str]]:
    """(label, text) pairs of the run's key settings and sizes, from config and results."""
    config = run.config or {}
    facts = []
    for label, path in FACTS:
        value = _get(config, *path)
        if value is None or isinstance(value, dict):
            continue
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        facts.append((label, str(value)))
    policy = config.get("policy") if isinstance(config.get("policy"), dict) else {}
    if policy.get("kind") in ("hf", "vllm"):
        facts.append(("policy model", str(_get(policy, "model", "name"))))
    elif policy.get("kind") == "openai":
        facts.append(("policy model", str(policy.get("served_model"))))
    results = run.results
    if results is not None:
        facts += [
            ("training data", results.data),
            ("training questions", str(results.train_questions)),
            ("evaluation questions", str(results.eval_questions)),
            ("steps trained", str(results.steps)),
        ]
    return facts
