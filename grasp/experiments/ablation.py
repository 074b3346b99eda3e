"""Ablation study: which variants a sweep trains, and one comparison table of their results.

``scripts/ablate.py`` trains every variant into ``<sweep_dir>/<variant>/`` (a run directory
of ``scripts/train.py``). This module reads those folders back and compares each variant's
evaluation after training with the matched full run (``none``) of the same sweep, the way the
paper's ablations compare against their own reference run rather than the main result::

    from grasp.experiments.ablation import write_comparison
    write_comparison(Path("runs/ablate/cpu_smoke"), ["none", "no_read", "no_rr"])

writes ``comparison.json`` (every value, its delta against the full run and its 95% bootstrap
interval where the evaluation has one) and ``comparison.md`` (the same as tables). A variant
that never ran, is still running or failed is a row that says so, never a dropped row.

A variant evaluated on the dev sets as well (``<variant>/eval_dev/``, scripts/evaluate.py;
``scripts/ablate.py dev_n=N``) also gets a row per dataset and pooled in the "Dev sets" table:
its values with their intervals and, against the full run's evaluation of the same
questions, the paired differences of EM, F1 and recall (grasp/eval/paired.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from grasp.env.tools import tool_names
from grasp.eval.config_diff import as_json, config_differences, flatten, predates
from grasp.eval.context import TokenCounter, context_tokens, read_trajectories
from grasp.eval.jsonl import read_json
from grasp.eval.paired import PAIRED_METRICS, PairedComparison, compare_folders
from grasp.eval.results import RESULTS_FILE as EVALUATION_RESULTS_FILE
from grasp.eval.results import DatasetResults, EvaluationResults, Summary
from grasp.experiments.sweep import (
    RunStatus,
    escape_cell,
    markdown_table,
    read_failure,
    write_table_files,
)
from grasp.metrics import ConfidenceInterval
from grasp.reward import REWARD_TERMS, RewardConfig
from grasp.train.run_folder import RunFolder
from grasp.types import StrEnum, parse_enum


class Ablation(StrEnum):
    """The variants of the ablation study: one ``configs/ablation/<name>.yaml`` each."""

    NONE = "none"
    NO_READ = "no_read"
    NO_SEMANTIC = "no_semantic"
    NO_KEYWORD = "no_keyword"
    NO_RR = "no_rr"
    NO_RS = "no_rs"

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Ablation.NONE: "full",
    Ablation.NO_READ: "no read_paragraph",
    Ablation.NO_SEMANTIC: "no semantic_search",
    Ablation.NO_KEYWORD: "no keyword_search",
    Ablation.NO_RR: "no R_R (alpha=0)",
    Ablation.NO_RS: "no R_S (beta=0)",
}

REFERENCE = Ablation.NONE
"""The full model: every other variant's deltas are taken against this run of the same sweep."""

ABLATION_FIELDS = (
    "env.tools",
    "rollout.reward.alpha",
    "rollout.reward.beta",
    "warm_start.adapt_plans",
)
"""The configuration keys that ``configs/ablation/*.yaml`` change (besides run_dir; a tool
ablation's warm start plays its plans with the variant's tools, ``adapt_plans``). A variant
that differs from its reference in anything else (seed, data, model, step budget, evaluation
questions...) is not matched, except in ``UNCOMPARED_FIELDS``."""
UNCOMPARED_FIELDS = (
    "run_dir",
    "wandb",
    "index.remote_url",
    "index.remote_timeout_s",
    "index.remote_retries",
)
"""Where a run is written and logged, and where the same index is searched from."""

DEV_EVAL_DIR = "eval_dev"
"""In a variant's run folder: its evaluation on the dev sets (scripts/evaluate.py's out)."""


def sweep_variants(variants: Iterable[str]) -> list[Ablation]:
    """The variants a sweep trains: the reference first, then ``variants`` in study order.

    The reference is always included: deltas are only meaningful against the full run of the
    same sweep, and a finished one costs nothing (it is skipped).
    """
    wanted = {parse_enum(Ablation, v, "variants") for v in variants}
    return [REFERENCE] + [a for a in Ablation if a in wanted and a is not REFERENCE]


# --- runs of one variant -----------------------------------------------------------------


def is_finished(run_dir: Path, resolved: dict[str, Any]) -> bool:
    """True when ``run_dir`` holds a finished run of exactly the configuration ``resolved``.

    Finished means results.json covers the configured step budget and no later attempt
    failed; a run moved to another folder (``UNCOMPARED_FIELDS``) is still finished; a
    different configuration is never finished (the trainer decides whether it can
    resume it or must refuse).
    """
    folder = RunFolder(run_dir)
    if read_failure(run_dir) is not None or not folder.results_file.exists():
        return False
    recorded = folder.read_config()
    if recorded is None:
        return False
    absent = set(flatten(as_json(resolved))) - set(flatten(recorded))
    differing = [
        key
        for key in config_differences(recorded, resolved)
        if not (key in absent and predates(key, resolved))  # a field added since, left as it was
        and not key.startswith(UNCOMPARED_FIELDS)  # e.g. the run folder, copied to results/
    ]
    if differing:
        return False
    steps = folder.recorded_steps() or 0
    return steps >= resolved["grpo"]["max_steps"]


# --- reading a sweep -----------------------------------------------------------------------


@dataclass
class VariantRun:
    """One variant's run folder, as read back after the sweep."""

    variant: Ablation
    run_dir: Path
    status: RunStatus
    after: DatasetResults | None = None
    """The evaluation after training (results.json's ``after``), for a finished run."""
    steps: int | None = None
    """Optimizer steps the finished run took."""
    config: dict[str, Any] | None = None
    """The run's resolved configuration (config.json), once training started."""
    error: str | None = None
    """What failed, for a failed run."""
    dev_status: RunStatus = RunStatus.MISSING
    """State of the evaluation on the dev sets (eval_dev/)."""
    dev: EvaluationResults | None = None
    """That evaluation's results.json, once it finished."""
    dev_error: str | None = None
    """What failed, for a failed dev evaluation."""


def read_variant(sweep_dir: Path, variant: Ablation) -> VariantRun:
    """Read ``<sweep_dir>/<variant>``; raise ValueError naming the file if it is malformed."""
    run_dir = sweep_dir / str(variant)
    run = _read_training(run_dir, variant)
    dev_dir = run_dir / DEV_EVAL_DIR
    run.dev_error = read_failure(dev_dir)
    if run.dev_error is not None:
        run.dev_status = RunStatus.FAILED
    elif (dev_dir / EVALUATION_RESULTS_FILE).exists():
        run.dev_status, run.dev = RunStatus.FINISHED, _read_evaluation(dev_dir)
    elif dev_dir.exists():
        run.dev_status = RunStatus.UNFINISHED
    return run


def _read_evaluation(folder: Path) -> EvaluationResults:
    """The dev evaluation in ``folder`` (scripts/evaluate.py's results.json); ValueError
    naming the file when it is not one."""
    path = folder / EVALUATION_RESULTS_FILE
    try:
        return EvaluationResults.from_json(read_json(path))
    except (TypeError, KeyError, AttributeError) as error:
        raise ValueError(f"{path}: not an evaluation's results ({error})") from None


def _read_training(run_dir: Path, variant: Ablation) -> VariantRun:
    folder = RunFolder(run_dir)
    config = folder.read_config()
    error = read_failure(run_dir)
    if error is not None:
        return VariantRun(variant, run_dir, RunStatus.FAILED, config=config, error=error)
    results = folder.read_results()
    if results is not None:
        after = results.after.results
        return VariantRun(variant, run_dir, RunStatus.FINISHED, after, results.steps, config)
    status = RunStatus.UNFINISHED if config is not None else RunStatus.MISSING
    return VariantRun(variant, run_dir, status, config=config)


# --- the comparison ------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One compared quantity."""

    key: str
    """Key of the value in each row's metrics (``em``, ``reward/R_A``, ``tool_calls/answer``)."""
    label: str
    """Header in comparison.md."""
    group: str
    """Which table of comparison.md shows it."""


GROUPS = ("Answers and retrieval", "Reward", "Tool calls per episode")
FULL_WEIGHTS_TOTAL = "reward/total_at_full_weights"
"""The reward recomputed with the full run's weights: comparable across reward ablations,
whose own ``reward/total`` leaves out the term they switch off."""
_TERM_WEIGHTS = {f"reward/{term.name}": term.weight for term in REWARD_TERMS}
"""Each term's key and the RewardConfig field that weighs it (``grasp.reward``)."""
_DEFAULT_WEIGHTS = {
    term.weight: getattr(RewardConfig(), term.weight)
    for term in REWARD_TERMS
    if term.sparse and term.weight is not None
}
"""Weights added after committed runs were configured (the terms added later, ``sparse``:
no_answer_penalty, search_gain, search_cost), at the default those runs ran with."""


def columns_for(runs: Sequence[VariantRun]) -> list[Column]:
    """The compared quantities: fixed answer metrics, then the reward terms and the tools that
    any finished variant reports (a term or tool none of them has is left out)."""
    finished = [r.after for r in runs if r.after is not None]
    columns = [
        Column("em", "EM", GROUPS[0]),
        Column("f1", "F1", GROUPS[0]),
        Column("recall", "recall", GROUPS[0]),
        Column("read_recall", "read recall", GROUPS[0]),
        Column("reward/total", "R (own weights)", GROUPS[1]),
        Column(FULL_WEIGHTS_TOTAL, "R (full weights)", GROUPS[1]),
    ]
    terms = {k for after in finished for k in after.reward if k != "reward/total"}
    for term in [*_TERM_WEIGHTS, *sorted(terms - set(_TERM_WEIGHTS))]:
        if term in terms:
            columns.append(Column(term, term.removeprefix("reward/"), GROUPS[1]))
    tools = {k for after in finished for k in after.tool_calls_per_episode}
    # Tools a variant offered but never called validly still get a column (0 calls).
    tools |= {str(t) for r in runs if r.config for t in r.config.get("env", {}).get("tools", [])}
    known = [str(t) for t in tool_names()]  # registered tools first, in registry order
    for tool in [*known, *sorted(tools - set(known))]:
        if tool in tools:
            columns.append(Column(f"tool_calls/{tool}", tool, GROUPS[2]))
    columns.append(Column("tool_calls/total", "total", GROUPS[2]))
    return columns


@dataclass
class Values:
    """Every compared value of one evaluation, by column key, and its 95% bootstrap interval
    (``[low, high]``) where the evaluation has one."""

    values: dict[str, float | None]
    ci: dict[str, list[float]]


def _values(after: DatasetResults, reference_config: dict[str, Any] | None) -> Values:
    """The compared values of the evaluation ``after`` (the reward at full weights with
    ``reference_config``'s weights)."""
    values: dict[str, float | None] = {k: getattr(after, k) for k in AFTER_METRICS}
    values.update(after.reward)
    values[FULL_WEIGHTS_TOTAL] = _total_at(after.reward, reference_config)
    calls = after.tool_calls_per_episode
    values.update({f"tool_calls/{tool}": n for tool, n in calls.items()})
    values["tool_calls/total"] = float(sum(calls.values()))
    intervals = {**after.ci, **after.reward_ci}
    return Values(values, {key: [ci.low, ci.high] for key, ci in intervals.items()})


AFTER_METRICS = ("em", "f1", "recall", "read_recall")
"""The answer and retrieval metrics compared, as ``DatasetResults`` fields."""


def _total_at(terms: dict[str, float], reference_config: dict[str, Any] | None) -> float | None:
    """The weighted sum of the term means with the reference's weights (the total is linear
    in the terms, so this is the mean reward the episodes would have had under them)."""
    if reference_config is None:
        return None
    weights = reference_config.get("rollout", {}).get("reward", {})
    total = 0.0
    for term, weight_name in _TERM_WEIGHTS.items():
        # A weight a config predates ran at its default (no_answer_penalty...: 0).
        default = None if weight_name is None else _DEFAULT_WEIGHTS.get(weight_name)
        weight = 1.0 if weight_name is None else weights.get(weight_name, default)
        if weight is None or (weight and term not in terms):
            return None
        if weight:
            total += weight * terms[term]
    return total


def _mismatch(run: VariantRun, reference: VariantRun) -> list[str]:
    """What makes ``run`` not matched to the reference: configuration keys outside the
    ablation's own fields, and a different number of steps taken."""
    if run.config is None or reference.config is None:
        return []
    exempt = (*ABLATION_FIELDS, *UNCOMPARED_FIELDS)
    found = [k for k in config_differences(run.config, reference.config) if k not in exempt]
    if run.steps is not None and reference.steps is not None and run.steps != reference.steps:
        found.append("steps")
    return found


class MetricCell(TypedDict):
    """One row's entry for one column (``_cell``)."""

    value: float | None
    delta: float | None
    """The value minus the reference's; None when either is missing."""
    ci: list[float] | None
    """``[low, high]``, where the evaluation computed one."""


class IntervalCell(TypedDict):
    value: float
    ci: list[float]


class _DevMetricInterval(TypedDict):
    value: float | None
    ci: list[float] | None
    delta: float | None
    delta_ci: list[float] | None


class DevMetric(_DevMetricInterval, total=False):
    """A dev-set metric's value and interval, and its paired difference from the full run
    (None: not paired)."""

    paired: int
    """The questions paired (when a difference was computed)."""


class _DevScopeMetrics(TypedDict):
    questions: int
    metrics: dict[str, DevMetric]
    turns_per_episode: float


class DevScope(_DevScopeMetrics, total=False):
    """One dataset, or the pooled datasets, of a variant's dev-set evaluation."""

    context_tokens: IntervalCell
    """Observation tokens per episode (with a token counter)."""


class _DevStatus(TypedDict):
    status: str
    error: str | None
    scopes: dict[str, DevScope]


class DevCell(_DevStatus, total=False):
    """A variant's dev-set evaluation (``_dev_cells``); ``n`` and ``pairing`` once it has one."""

    n: int | None
    pairing: str | None
    """Why it is not paired with the full run's (None: paired, or the full run itself)."""


class ComparisonRow(TypedDict):
    """One variant of comparison.json's ``rows``."""

    variant: str
    label: str
    status: str
    run_dir: str
    steps: int | None
    eval_questions: int | None
    mismatch: list[str]
    error: str | None
    metrics: dict[str, MetricCell]
    """By column key."""
    dev: DevCell


class ComparisonJson(TypedDict):
    """comparison.json."""

    sweep_dir: str
    reference: str
    complete: bool
    columns: list[dict[str, str]]
    """Each ``Column``'s fields."""
    rows: list[ComparisonRow]


@dataclass
class Comparison:
    """The comparison table: ``as_json()`` is comparison.json, ``markdown()`` comparison.md."""

    sweep_dir: Path
    columns: list[Column]
    rows: list[ComparisonRow] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return all(row["status"] == RunStatus.FINISHED for row in self.rows)

    def as_json(self) -> ComparisonJson:
        return {
            "sweep_dir": str(self.sweep_dir),
            "reference": str(REFERENCE),
            "complete": self.complete,
            "columns": [vars(c) for c in self.columns],
            "rows": self.rows,
        }

    def markdown(self) -> str:
        return render_markdown(self)


def compare(
    sweep_dir: Path, variants: Iterable[str], count: TokenCounter | None = None
) -> Comparison:
    """Read the sweep's variants (the reference first) and build the comparison.

    Each row holds, per column, ``value``, ``delta`` (value minus the reference's; None when
    either is missing) and ``ci`` (``[low, high]``, the 95% bootstrap interval of the value,
    where the evaluation computed one).
    """
    runs = [read_variant(sweep_dir, v) for v in sweep_variants(variants)]
    reference = runs[0]
    columns = columns_for(runs)
    cells = {
        r.variant: _values(r.after, reference.config) if r.after is not None else None for r in runs
    }
    comparison = Comparison(sweep_dir, columns)
    for run in runs:
        metrics = {}
        for column in columns:
            metrics[column.key] = _cell(column.key, cells[run.variant], cells[REFERENCE])
        comparison.rows.append(
            {
                "variant": str(run.variant),
                "label": run.variant.label,
                "status": str(run.status),
                "run_dir": str(run.run_dir),
                "steps": run.steps,
                "eval_questions": run.after.questions if run.after else None,
                "mismatch": _mismatch(run, reference),
                "error": run.error,
                "metrics": metrics,
                "dev": _dev_cells(run, reference, count),
            }
        )
    return comparison


DEV_METRICS = ("em", "f1", "recall", "read_recall")
"""Values of the dev-set table with their intervals; PAIRED_METRICS also get paired deltas."""
POOLED = "pooled"


PAIRING_FIELDS = ("n", "seed", "split", "datasets")
"""Settings two dev evaluations share for their questions to be the same ones."""


def _pairing(run: VariantRun, reference: VariantRun) -> tuple[PairedComparison | None, str | None]:
    """The paired comparison of a variant's dev evaluation with the full run's, or why there
    is none (the reference itself, no finished reference, other questions, nothing shared)."""
    if run.variant is REFERENCE or run.dev is None:
        return None, None
    if reference.dev is None:
        return None, "not paired: the full run has no finished dev evaluation"
    mine, theirs = run.dev.config, reference.dev.config
    differing = [k for k in PAIRING_FIELDS if mine.get(k) != theirs.get(k)]
    if differing:
        return None, f"not paired: other questions than the full run's ({', '.join(differing)})"
    try:
        paired = compare_folders(
            run.run_dir / DEV_EVAL_DIR, reference.run_dir / DEV_EVAL_DIR, mine.get("datasets")
        )
    except (OSError, ValueError) as error:
        return None, f"not paired: {error}"
    return paired, None


def _dev_cells(
    run: VariantRun, reference: VariantRun, count: TokenCounter | None = None
) -> DevCell:
    """A variant's dev-set evaluation: per dataset and pooled, each metric's value and
    interval, its turns per episode, and (against the full run's evaluation of the same
    questions) the paired difference of each of PAIRED_METRICS."""
    cell: DevCell = {"status": str(run.dev_status), "error": run.dev_error, "scopes": {}}
    if run.dev is None:
        return cell
    cell["n"] = run.dev.config.get("n")
    paired, cell["pairing"] = _pairing(run, reference)
    summaries: dict[str, Summary] = {**run.dev.datasets, POOLED: run.dev.overall.pooled}
    for scope, summary in summaries.items():
        values: dict[str, DevMetric] = {}
        for metric in DEV_METRICS:
            interval = summary.ci.get(metric)
            ci = [interval.low, interval.high] if interval else None
            value = getattr(summary, metric)
            values[metric] = {"value": value, "ci": ci, "delta": None, "delta_ci": None}
        if paired is not None:
            differences = paired.pooled if scope == POOLED else paired.datasets.get(scope)
            for metric in PAIRED_METRICS if differences is not None else ():
                d = differences[metric].difference
                values[metric].update(delta=d.mean, delta_ci=[d.low, d.high], paired=d.n)
        cell["scopes"][scope] = {
            "questions": summary.episodes,
            "metrics": values,
            "turns_per_episode": summary.turns_per_episode,
        }
    if count is not None:
        _add_context_tokens(cell["scopes"], run.run_dir / DEV_EVAL_DIR, count)
    return cell


def _add_context_tokens(scopes: dict[str, DevScope], folder: Path, count: TokenCounter) -> None:
    """Each part's observation tokens per episode (grasp/eval/context.py), with its interval."""
    pooled = []
    for scope, part in scopes.items():
        if scope == POOLED:
            continue
        trajectories = read_trajectories(folder / scope)
        pooled.extend(trajectories)
        part["context_tokens"] = _interval_cell(context_tokens(trajectories, count))
    if POOLED in scopes and pooled:
        scopes[POOLED]["context_tokens"] = _interval_cell(context_tokens(pooled, count))


def _interval_cell(interval: ConfidenceInterval) -> IntervalCell:
    return {"value": interval.mean, "ci": [interval.low, interval.high]}


def _cell(key: str, cell: Values | None, reference: Values | None) -> MetricCell:
    """One row's entry for one column: value, delta against the reference, interval."""
    if cell is None:
        return {"value": None, "delta": None, "ci": None}
    # A tool the variant never called was called 0 times per episode (not unknown).
    default = 0.0 if key.startswith("tool_calls/") else None
    value = cell.values.get(key, default)
    base = reference.values.get(key, default) if reference is not None else None
    delta = value - base if value is not None and base is not None else None
    return {"value": value, "delta": delta, "ci": cell.ci.get(key)}


def render_markdown(comparison: Comparison) -> str:
    """comparison.md: a runs table, then one table per group of columns."""
    rows = comparison.rows
    lines = [
        f"# Ablations: {comparison.sweep_dir}",
        "",
        "Evaluation after training of every variant; each cell is the value, its 95% bootstrap "
        f"interval where there is one, and (in parentheses) the difference from the full run "
        f"(`{REFERENCE}`) of this sweep.",
        "",
    ]
    runs = []
    for row in rows:
        note = row["error"] or ""
        if row["mismatch"]:
            note = f"not matched: differs from the full run in {', '.join(row['mismatch'])}"
        steps = "" if row["steps"] is None else str(row["steps"])
        questions = "" if row["eval_questions"] is None else str(row["eval_questions"])
        runs.append([_name(row), str(row["status"]), steps, questions, escape_cell(note)])
    lines += markdown_table(["variant", "status", "steps", "eval questions", "note"], runs)
    for group in GROUPS:
        columns = [c for c in comparison.columns if c.group == group]
        lines += ["", f"## {group}", ""]
        cells = [
            [_name(row), *(_format_cell(row["metrics"][c.key], row["variant"]) for c in columns)]
            for row in rows
        ]
        lines += markdown_table(["variant", *(c.label for c in columns)], cells)
    lines += _dev_markdown(rows)
    return "\n".join(lines) + "\n"


def _dev_markdown(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The "Dev sets" table, when any variant has a dev-set evaluation (finished or not)."""
    if all(row["dev"]["status"] == RunStatus.MISSING for row in rows):
        return []
    lines = [
        "",
        "## Dev sets",
        "",
        "Each trained variant evaluated by scripts/evaluate.py in its own environment "
        "(greedy, seed-42 questions of each dev set, searched in the dev set's own pooled "
        "index). In parentheses: the paired difference from the full run on the same "
        "questions, with its 95% paired-bootstrap interval.",
        "",
    ]
    header = ["variant", "part", "questions", "EM", "F1", "recall", "read recall", "turns"]
    tokens = any("context_tokens" in p for row in rows for p in row["dev"]["scopes"].values())
    header += ["context tokens"] if tokens else []
    cells = []
    for row in rows:
        dev = row["dev"]
        if not dev["scopes"]:
            note = dev["error"] or str(dev["status"])
            cells.append([_name(row), escape_cell(note), *[""] * (len(header) - 2)])
            continue
        for scope, part in dev["scopes"].items():
            metrics = [_dev_value(part["metrics"][m]) for m in DEV_METRICS]
            turns = part["turns_per_episode"]
            cells.append(
                [
                    _name(row),
                    scope,
                    "" if part["questions"] is None else str(part["questions"]),
                    *metrics,
                    "—" if turns is None else f"{turns:.2f}",
                    *([_context_value(part.get("context_tokens"))] if tokens else []),
                ]
            )
    lines += markdown_table(header, cells)
    notes = [
        f"- {_name(row)}: {row['dev']['pairing']}" for row in rows if row["dev"].get("pairing")
    ]
    return lines + ([""] + notes if notes else [])


def _context_value(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "—"
    return f"{cell['value']:.0f} [{cell['ci'][0]:.0f}, {cell['ci'][1]:.0f}]"


def _dev_value(cell: dict[str, Any]) -> str:
    text = f"{cell['value']:.3f}"
    if cell["ci"] is not None:
        text += f" [{cell['ci'][0]:.3f}, {cell['ci'][1]:.3f}]"
    if cell["delta"] is not None:
        low, high = cell["delta_ci"]
        text += f" ({cell['delta']:+.3f} [{low:+.3f}, {high:+.3f}])"
    return text


def _name(row: dict[str, Any]) -> str:
    return f"{row['label']} (`{row['variant']}`)"


def _format_cell(cell: dict[str, Any], variant: str) -> str:
    if cell["value"] is None:
        return "—"
    text = f"{cell['value']:.3f}"
    if cell["ci"] is not None:
        text += f" [{cell['ci'][0]:.3f}, {cell['ci'][1]:.3f}]"
    if variant != REFERENCE and cell["delta"] is not None:
        text += f" ({cell['delta']:+.3f})"
    return text


@dataclass
class ComparisonFiles:
    comparison: Comparison
    json_path: Path
    markdown_path: Path


def write_comparison(
    sweep_dir: Path, variants: Iterable[str], count: TokenCounter | None = None
) -> ComparisonFiles:
    """Compare the sweep's variants; write comparison.json and comparison.md in ``sweep_dir``."""
    comparison = compare(sweep_dir, variants, count)
    files = write_table_files(sweep_dir, "comparison", comparison.as_json(), comparison.markdown())
    return ComparisonFiles(comparison, files.json_path, files.markdown_path)
