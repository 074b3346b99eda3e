"""The baseline table: every baseline evaluated with the same backend, side by side.

``scripts/baselines.py`` evaluates each baseline (``configs/baseline/<name>.yaml``) into
``<sweep_dir>/<name>/``, an output folder of ``scripts/evaluate.py``. This module reads those
folders back and writes ``table.json`` and ``table.md``: per dataset EM, F1, JD and paragraph
recall, each with its 95% bootstrap interval, and the evaluation's wall time; then all
questions pooled and the macro mean over datasets; the code's commit and the policy's
identity once::

    planned = [PlannedBaseline(Baseline.DIRECT, sweep / "direct", resolved_config)]
    write_table(sweep, planned, ["hotpotqa", "musique"])

A baseline that was not run, never started, is unfinished or failed is a row that says so,
never a dropped row. Trained policies are rows too (``PlannedBaseline(name, run_dir, label=)``,
``trained`` in configs/baselines.yaml): a stage of a training run evaluated by
``scripts/evaluate.py run_dir=R stage=S`` with the table's datasets, n and seed. Given a
token counter, each dataset and the pooled questions also get the context tokens per episode
(``grasp/eval/context.py``): what the tools showed the policy, counted alike for every row.
Rows whose results report a rewrite trigger rate (``policy_extra.trigger_rate``: CRAG,
Self-RAG) have it per dataset and pooled, in a section of its own. Rows whose folders hold
every dataset's trajectories get the failure taxonomy (``grasp/eval/failures.py``) per
dataset and pooled, computed from those trajectories, so committed evaluations get it
without a rerun; its section shows the pooled shares. Beside EM and F1 each part has EM on
comparison and on other questions, answer containment, and the read_paragraph calls per episode
that ran and that were refused (``grasp.eval.summary``): from results.json where it holds them,
else from the trajectories, with each question's type looked up by id in ``types`` (the
dataset files: trajectories do not record it), so committed evaluations get them too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grasp.eval.config_diff import as_json, config_differences, flatten, predates
from grasp.eval.context import TokenCounter, context_tokens, has_trajectories, read_trajectories
from grasp.eval.failures import FailureCode, failure_shares
from grasp.eval.jsonl import read_json
from grasp.eval.paired import PAIRED_METRICS, compare_folders, signed
from grasp.eval.results import (
    NOT_AVAILABLE,
    NOT_RECORDED,
    DatasetResults,
    EvaluationResults,
    Interval,
    MacroResults,
    PooledResults,
    Summary,
)
from grasp.eval.summary import EpisodeScores, macro_summary, metric_values
from grasp.eval.tables import describe
from grasp.experiments.matched_context import MatchedContext, matched_entries, matched_section
from grasp.experiments.sweep import (
    RunStatus,
    TableFiles,
    escape_cell,
    markdown_table,
    read_failure,
    write_table_files,
)
from grasp.metrics import bootstrap_ci
from grasp.types import StrEnum


class Baseline(StrEnum):
    """The baselines of the table, in its row order: one ``configs/baseline/<name>.yaml`` each."""

    NONE = "none"
    SEARCH_R1 = "search_r1"
    DIRECT = "direct"
    SINGLE_STEP_SEMANTIC = "single_step_semantic"
    SINGLE_STEP_LEXICAL = "single_step_lexical"
    SINGLE_STEP_HYBRID = "single_step_hybrid"
    SINGLE_STEP_PARAGRAPH = "single_step_paragraph"
    SINGLE_STEP_RERANK = "single_step_rerank"
    IRCOT = "ircot"
    CRAG = "crag"
    ADAPTIVE = "adaptive"
    SELF_RAG = "self_rag"
    ADAPTIVE_SELF_RAG = "adaptive_self_rag"

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Baseline.NONE: "prompted agent",
    Baseline.SEARCH_R1: "Search-R1 agent",
    Baseline.DIRECT: "direct answer",
    Baseline.SINGLE_STEP_SEMANTIC: "single-step, dense",
    Baseline.SINGLE_STEP_LEXICAL: "single-step, BM25",
    Baseline.SINGLE_STEP_HYBRID: "single-step, hybrid",
    Baseline.SINGLE_STEP_PARAGRAPH: "single-step, paragraphs",
    Baseline.SINGLE_STEP_RERANK: "single-step, reranked",
    Baseline.IRCOT: "IRCoT",
    Baseline.CRAG: "CRAG",
    Baseline.ADAPTIVE: "Adaptive-RAG",
    Baseline.SELF_RAG: "Self-RAG",
    Baseline.ADAPTIVE_SELF_RAG: "Adaptive-RAG, index router + Self-RAG",
}

RESULTS_FILE = "results.json"
UNCOMPARED_FIELDS = ("out", "show", "threads")
"""Where an evaluation was written (a finished one in a moved sweep folder is still finished),
what it printed and how many threads it ran on."""
METRICS = (("em", "EM"), ("f1", "F1"), ("jd", "JD"), ("recall", "recall"))
"""(results key, header) of the compared quantities."""
BREAKDOWN = (
    ("em_comparison", "EM comparison"),
    ("em_other", "EM other"),
    ("containment", "containment"),
)
"""(results key, header) of EM by kind of question and of answer containment."""
READS = ("reads_run_per_episode", "reads_refused_per_episode")
"""Cell keys of the read_paragraph calls per episode that ran and that were refused."""
READS_HEADER = "reads ran / refused"
TYPE_COUNTS = {"em_comparison": "comparison_episodes", "em_other": "other_episodes"}
"""The episode count of each EM by kind of question (a cell's ``n``)."""
QuestionTypes = Mapping[str, Mapping[str, str]]
"""Each dataset's question types (``Question.type``) by question id."""
CONTEXT = ("context_tokens", "context tokens")
"""(cell key, header) of the context tokens per episode, when the table counts them."""
TRIGGER = "trigger_rate"
"""Cell key of a corrective baseline's rewrite trigger rate (``policy_extra.trigger_rate``)."""
FAILURES = "failures"
"""Cell key of the failure shares (``failure_shares``), when the row's trajectories exist."""


def unmet_requirement(config: Mapping[str, Any]) -> str | None:
    """What an evaluation's composed configuration lacks to run, or None.

    Checked before the configuration is built (building it would raise): the sweep runs
    the other baselines and the table says why this one was not run.
    """
    reranker = config.get("baseline", {}).get("reranker", {})
    if reranker.get("enabled") and not reranker.get("path"):
        return "needs baseline.reranker.path"
    return None


@dataclass
class PlannedBaseline:
    """One row of the table as the sweep planned it."""

    baseline: Baseline | str
    """A baseline, or the name of a trained policy's row."""
    run_dir: Path
    """The evaluation's output folder (``out=``)."""
    config: dict[str, Any] | None = None
    """The resolved EvaluateConfig it runs with; None when it is not run."""
    not_run: str | None = None
    """Why the sweep leaves it out (``unmet_requirement``)."""
    label: str | None = None
    """The row's name in the table; a baseline's own label by default."""

    @property
    def row_label(self) -> str:
        if self.label is not None:
            return self.label
        if not isinstance(self.baseline, Baseline):
            raise ValueError(f"row {self.baseline!r}: a trained policy's row needs a label")
        return self.baseline.label


def is_finished(run_dir: Path, resolved: Mapping[str, Any]) -> bool:
    """True when ``run_dir`` holds a finished evaluation of exactly ``resolved`` (an
    EvaluateConfig as a dict) and no later attempt failed."""
    return not unfinished_because(run_dir, resolved)


def unfinished_because(run_dir: Path, resolved: Mapping[str, Any]) -> list[str]:
    """Why ``run_dir`` does not hold a finished evaluation of ``resolved``: the differing
    config fields, or a one-line reason; empty when it does."""
    results = run_dir / RESULTS_FILE
    if read_failure(run_dir) is not None:
        return ["a later attempt failed (failed.json)"]
    if not results.exists():
        return [f"no {RESULTS_FILE}"]
    return _mismatch(read_json(results).get("config", {}), resolved)


def _mismatch(recorded: Mapping[str, Any], resolved: Mapping[str, Any] | None) -> list[str]:
    if resolved is None:
        return []
    recorded_keys = set(flatten(as_json(recorded)))
    return [
        k
        for k in config_differences(recorded, resolved)
        if k not in UNCOMPARED_FIELDS and not (k not in recorded_keys and predates(k, resolved))
    ]


# --- one row -------------------------------------------------------------------------------


def _cell(value: Any, interval: Interval | None) -> dict[str, Any]:
    """``{"value", "ci"}``: the mean (or "not computed"...) and its [low, high] interval."""
    if isinstance(value, Interval):  # a macro entry
        value, interval = value.mean, value
    ci = [interval.low, interval.high] if interval and not isinstance(value, str) else None
    return {"value": value, "ci": ci}


def _metrics(results: Summary | MacroResults) -> dict[str, Any]:
    """The compared quantities of one results entry (a dataset's, pooled or macro)."""
    if isinstance(results, MacroResults):
        cells = {key: _cell(results.means.get(key), None) for key, _ in METRICS}
        for key in _added_keys():  # absent from results written before they were recorded
            if key in results.means:
                cells[key] = _counted(key, results.means[key], None)
        return cells
    cells = {key: _cell(getattr(results, key), results.ci.get(key)) for key, _ in METRICS}
    for key in _added_keys():
        value = getattr(results, key)
        if value is not None:
            count = getattr(results, TYPE_COUNTS[key]) if key in TYPE_COUNTS else None
            cells[key] = _counted(key, value, results.ci.get(key), count)
    verdicts = results.judge  # counts by verdict, when a judge ran
    if verdicts is not None:
        answers = sum(verdicts.values())
        unscored = verdicts.get("unparseable", 0) + verdicts.get("error", 0)
        cells["jd_scored"] = {"scored": answers - unscored, "answers": answers}
    if isinstance(results, DatasetResults | PooledResults):
        cells["wall_time_s"] = results.wall_time_s
        if isinstance(results, DatasetResults):
            cells["questions"] = results.questions
        cells["questions_rolled_out"] = results.questions_rolled_out
        cells["questions_timed"] = results.questions_timed
    extra = results.policy_extra or {}
    if TRIGGER in extra:  # a corrective baseline's (grasp.eval.summary.extra_summary)
        cells[TRIGGER] = {"rate": extra[TRIGGER], "episodes": extra.get("trigger_episodes")}
    return cells


def _added_keys() -> tuple[str, ...]:
    return (*(key for key, _ in BREAKDOWN), *READS)


def _counted(
    key: str, value: Any, interval: Interval | None, count: int | None = None
) -> dict[str, Any]:
    """``_cell``, with ``n`` (the episodes it is over) for EM by kind of question: ``count``,
    or a macro interval's; None when question types are unknown."""
    cell = _cell(value, interval)
    if key in TYPE_COUNTS:
        cell["n"] = value.n if isinstance(value, Interval) else count
    return cell


def read_row(
    planned: PlannedBaseline,
    datasets: Sequence[str],
    count: TokenCounter | None = None,
    types: QuestionTypes | None = None,
) -> dict[str, Any]:
    """One baseline's row: its status, and its values once its evaluation finished (with
    the context tokens per episode when ``count`` is given; ``types`` joins question types
    to trajectories whose results.json predates EM by kind of question)."""
    row: dict[str, Any] = {
        "baseline": str(planned.baseline),
        "label": planned.row_label,
        "run_dir": str(planned.run_dir),
        "status": str(RunStatus.MISSING),
        "note": None,
        "mismatch": [],
        "questions": None,
        "wall_time_s": None,
        "datasets": {},
        "pooled": None,
        "macro": None,
    }
    results_file = planned.run_dir / RESULTS_FILE
    error = read_failure(planned.run_dir)
    if planned.not_run is not None:
        row.update(status=str(RunStatus.NOT_RUN), note=planned.not_run)
    elif error is not None:
        row.update(status=str(RunStatus.FAILED), note=error)
    elif results_file.exists():
        results = read_json(results_file)
        row.update(_finished(results, datasets, results_file))
        _add_trajectory_cells(row, planned.run_dir, datasets, count, types or {})
        row["mismatch"] = _mismatch(results.get("config", {}), planned.config)
        if row["mismatch"]:
            row["note"] = f"not matched: differs from this sweep in {', '.join(row['mismatch'])}"
    elif planned.run_dir.exists():
        row["status"] = str(RunStatus.UNFINISHED)
    return row


def _finished(data: Mapping[str, Any], datasets: Sequence[str], path: Path) -> dict[str, Any]:
    absent = [d for d in datasets if d not in data.get("datasets", {})]
    if absent or "overall" not in data:
        raise ValueError(f"{path}: no results of {absent or 'overall'}")
    try:
        results = EvaluationResults.from_json(data)
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not an evaluation's results ({error})") from error
    pooled = results.overall.pooled
    return {
        "status": str(RunStatus.FINISHED),
        "questions": results.questions,
        "wall_time_s": pooled.wall_time_s,
        "datasets": {d: _metrics(results.datasets[d]) for d in datasets},
        "pooled": _metrics(pooled),
        "macro": _metrics(results.overall.macro),
        "provenance": results.provenance or {},
        "protocol": {k: results.config.get(k) for k in ("split", "n", "seed")},
    }


def _add_trajectory_cells(
    row: dict[str, Any],
    run_dir: Path,
    datasets: Sequence[str],
    count: TokenCounter | None,
    types: QuestionTypes,
) -> None:
    """From the trajectories, read once: each dataset's and the pooled failure shares and,
    where results.json lacks them, EM by kind of question, containment and reads (when
    every dataset has its trajectories), and context tokens per episode (when ``count`` is
    given: then a missing trajectory file is an error)."""
    failures = all(has_trajectories(run_dir / d) for d in datasets)
    if count is None and not failures:
        return
    by_dataset = {d: read_trajectories(run_dir / d) for d in datasets}
    parts = [(row["datasets"][d], by_dataset[d]) for d in datasets]
    parts.append((row["pooled"], [t for _, part in parts for t in part]))
    for cells, trajectories in parts:
        if count is not None:
            cells[CONTEXT[0]] = _interval_cell(context_tokens(trajectories, count))
        if failures:
            cells[FAILURES] = failure_shares(trajectories)
    if failures:
        _add_breakdown(row, by_dataset, types)


def _add_breakdown(
    row: dict[str, Any], by_dataset: Mapping[str, Sequence[Any]], types: QuestionTypes
) -> None:
    """EM by kind of question, containment and reads of each dataset, pooled and macro,
    computed from the trajectories as the evaluation's summary computes them, for the parts
    whose results.json predates them (it is the one that knows the questions' types)."""
    values = {
        d: metric_values(part, EpisodeScores.typed(part, types.get(d, {})))
        for d, part in by_dataset.items()
    }
    typed = {d: bool(types.get(d)) for d in by_dataset}
    pooled = {key: [v for d in by_dataset for v in values[d][key]] for key in _added_keys()}
    parts = [(row["datasets"][d], values[d], typed[d]) for d in by_dataset]
    parts.append((row["pooled"], pooled, all(typed.values())))
    for cells, part, known in parts:
        for key in _added_keys():
            if key in cells:
                continue
            if not part[key]:  # no question of that kind, or no type known
                cells[key] = _counted(key, NOT_AVAILABLE, None, 0 if known else None)
                continue
            ci = bootstrap_ci(part[key])
            interval = Interval(ci.mean, ci.low, ci.high, ci.n)
            cells[key] = _counted(key, ci.mean, interval, ci.n if known else None)
    macro = macro_summary(values).means
    for key in _added_keys():
        if key not in row["macro"]:
            row["macro"][key] = _counted(key, macro[key], None)


def _interval_cell(interval: Any) -> dict[str, Any]:
    return {"value": interval.mean, "ci": [interval.low, interval.high]}


# --- the table -----------------------------------------------------------------------------


@dataclass
class BaselineTable:
    """``as_json()`` is table.json, ``markdown()`` table.md."""

    sweep_dir: Path
    datasets: list[str]
    rows: list[dict[str, Any]]
    context_counted: bool = False
    """Each dataset and the pooled questions have a context-tokens column."""
    paired: list[dict[str, Any]] = field(default_factory=list)
    """The paired differences of the compared rows (``paired_entry``), in the config's order."""
    matched: list[dict[str, Any]] = field(default_factory=list)
    """Each trained row against a swept baseline at matched context (``matched_entries``)."""
    matched_metrics: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every planned baseline finished (those not run excepted)."""
        return all(r["status"] in (RunStatus.FINISHED, RunStatus.NOT_RUN) for r in self.rows)

    @property
    def provenance(self) -> dict[str, Any]:
        """What produced the first finished row (every row's, unless ``differs`` says not)."""
        finished = [r for r in self.rows if r["status"] == RunStatus.FINISHED]
        if not finished:
            return {}
        first = finished[0]
        differs = {
            r["baseline"]: [k for k in ("code", "policy", "judge") if _get(r, k) != _get(first, k)]
            for r in finished
        }
        return {
            "code": _get(first, "code"),
            "policy": _get(first, "policy"),
            "judge": _get(first, "judge"),
            "protocol": first["protocol"],
            "differs": {b: keys for b, keys in differs.items() if keys},
        }

    def as_json(self) -> dict[str, Any]:
        rows = [
            {k: v for k, v in r.items() if k not in ("provenance", "protocol")} for r in self.rows
        ]
        return {
            "sweep_dir": str(self.sweep_dir),
            "datasets": self.datasets,
            "context_counted": self.context_counted,
            "complete": self.complete,
            "provenance": self.provenance,
            "rows": rows,
            "paired": self.paired,
            **({"matched_context": self.matched} if self.matched else {}),
        }

    def markdown(self) -> str:
        return render_markdown(self)


def _get(row: Mapping[str, Any], key: str) -> Any:
    return row.get("provenance", {}).get(key)


def baseline_table(
    sweep_dir: Path,
    planned: Sequence[PlannedBaseline],
    datasets: Sequence[str],
    count: TokenCounter | None = None,
    pairs: Sequence[Sequence[str]] = (),
    types: QuestionTypes | None = None,
    matched: MatchedContext | None = None,
) -> BaselineTable:
    """Read every planned baseline's folder; raise ValueError naming a malformed file.
    ``count`` (text -> tokens) adds the context tokens per episode; ``pairs`` (row names
    A, B) adds A minus B question by question (``paired_entry``); ``types`` (each dataset's
    question types by id) splits the EM of evaluations recorded before it was split;
    ``matched`` (with ``count``) adds rows against a swept baseline at matched context."""
    rows = [read_row(p, datasets, count, types) for p in planned]
    paired = [paired_entry(rows, datasets, a, b) for a, b in pairs]
    entries = []
    if matched is not None and count is not None:
        entries = matched_entries(rows, datasets, matched, count)
    return BaselineTable(
        sweep_dir,
        list(datasets),
        rows,
        context_counted=count is not None,
        paired=paired,
        matched=entries,
        matched_metrics=list(matched.metrics) if matched is not None else [],
    )


def paired_entry(
    rows: Sequence[Mapping[str, Any]], datasets: Sequence[str], a: str, b: str
) -> dict[str, Any]:
    """Row ``a`` minus row ``b`` on the questions both evaluated, per dataset and pooled
    (``grasp/eval/paired.py``), from their trajectories; a note instead when either row is
    not a finished row of this table."""
    by_name = {r["baseline"]: r for r in rows}
    entry: dict[str, Any] = {"a": a, "b": b, "note": None, "datasets": {}, "pooled": None}
    absent = [n for n in (a, b) if by_name.get(n, {}).get("status") != RunStatus.FINISHED]
    if absent:
        entry["note"] = f"not compared: {', '.join(absent)} not a finished row of this table"
        return entry
    entry["labels"] = [by_name[a]["label"], by_name[b]["label"]]
    folders = [Path(by_name[name]["run_dir"]) for name in (a, b)]
    compared = compare_folders(*folders, datasets).as_json()
    entry.update(datasets=compared["datasets"], pooled=compared["pooled"])
    return entry


def write_table(
    sweep_dir: Path,
    planned: Sequence[PlannedBaseline],
    datasets: Sequence[str],
    count: TokenCounter | None = None,
    pairs: Sequence[Sequence[str]] = (),
    types: QuestionTypes | None = None,
    matched: MatchedContext | None = None,
) -> TableFiles:
    """Build the table and write table.json and table.md in ``sweep_dir``."""
    table = baseline_table(sweep_dir, planned, datasets, count, pairs, types, matched)
    return write_table_files(sweep_dir, "table", table.as_json(), table.markdown())


# --- table.md ------------------------------------------------------------------------------


def render_markdown(table: BaselineTable) -> str:
    """A runs table, then one table per dataset, then pooled and macro (several datasets)."""
    lines = [f"# Baselines: {table.sweep_dir}", "", *_header(table.provenance)]
    if table.context_counted:
        lines.append(
            "- context tokens: tokens per episode of every observation the tools showed the "
            "policy (search results, read paragraphs, refusals of malformed calls), counted "
            "with the policy model's tokenizer for every row alike"
        )
    lines.append("")
    runs = []
    for row in table.rows:
        questions = "" if row["questions"] is None else str(row["questions"])
        note = escape_cell(row["note"] or "")
        runs.append([_name(row), row["status"], questions, _seconds(row["wall_time_s"]), note])
    lines += markdown_table(["baseline", "status", "questions", "wall s", "note"], runs)
    sections = [(d, d) for d in table.datasets]
    if len(table.datasets) > 1:
        sections += [("overall (pooled)", "pooled"), ("overall (macro)", "macro")]
    for title, part in sections:
        lines += ["", f"## {title}", ""]
        context = table.context_counted and part != "macro"
        header = ["baseline", *(label for _, label in (*METRICS[:3], *BREAKDOWN, *METRICS[3:]))]
        header.append(READS_HEADER)
        if context:
            header.append(CONTEXT[1])
        if part != "macro":
            header.append("wall s")
        counts = _type_counts(table, part)
        if counts:
            stated = ", ".join(f"{what} questions: {n}" for what, n in counts.items())
            lines += [f"{stated} (a row over other numbers says `(n=...)`)", ""]
        cells = [
            [
                _name(row),
                *_metric_cells(
                    _part(row, part), part == "macro", _scored(row, part), context, counts
                ),
            ]
            for row in table.rows
        ]
        lines += markdown_table(header, cells)
    lines += _paired_section(table)
    lines += matched_section(table.matched, table.matched_metrics)
    lines += _trigger_section(table)
    lines += _failure_section(table)
    return "\n".join(lines) + "\n"


def _paired_section(table: BaselineTable) -> list[str]:
    """A minus B, pooled, for each compared pair of rows; no pairs: no lines."""
    if not table.paired:
        return []
    header = ["A", "B", "questions", *(f"{m} A − B" for m in PAIRED_METRICS), "EM higher A/B"]
    cells = []
    for entry in table.paired:
        names = [f"`{entry['a']}`", f"`{entry['b']}`"]
        pooled = entry["pooled"]
        if pooled is None:
            cells.append([*names, "—", *(["—"] * len(PAIRED_METRICS)), escape_cell(entry["note"])])
            continue
        differences = [signed(pooled[m]) for m in PAIRED_METRICS]
        em = pooled["em"]
        questions = str(em["questions"])
        cells.append([*names, questions, *differences, f"{em['a_higher']}/{em['b_higher']}"])
    return [
        "",
        "## paired differences (pooled)",
        "",
        "Row A minus row B on the questions both evaluated: the mean of the per-question "
        "differences [95% paired-bootstrap interval, resampling questions]; an interval that "
        "excludes 0 means the rows differ on these questions. EM higher A/B: questions on "
        "which each row's answer is exact and the other's is not. Per dataset in table.json.",
        "",
        *markdown_table(header, cells),
    ]


def _trigger_section(table: BaselineTable) -> list[str]:
    """The rewrite trigger rate of the rows that report one (CRAG, Self-RAG); none: no lines."""
    parts = [*table.datasets, "pooled"]
    rows = [r for r in table.rows if any(TRIGGER in (_part(r, p) or {}) for p in parts)]
    if not rows:
        return []
    cells = []
    for row in rows:
        rates = [(_part(row, p) or {}).get(TRIGGER) for p in parts]
        cells.append(
            [
                _name(row),
                *("—" if c is None else f"{c['rate']:.3f} ({c['episodes']})" for c in rates),
            ]
        )
    return [
        "",
        "## rewrite trigger rate",
        "",
        "Share of the episodes that graded hits whose rewrite trigger fired (CRAG: irrelevant "
        "share above `crag_threshold`; Self-RAG: `baseline.self_rag.trigger`), with the number "
        "of such episodes.",
        "",
        *markdown_table(["baseline", *parts], cells),
    ]


def _failure_section(table: BaselineTable) -> list[str]:
    """The pooled failure shares of the rows that have them; none: no lines."""
    rows = [r for r in table.rows if FAILURES in (r["pooled"] or {})]
    if not rows:
        return []
    codes = [str(code) for code in FailureCode]
    cells = [[_name(r), *(f"{r['pooled'][FAILURES][c]:.3f}" for c in codes)] for r in rows]
    return [
        "",
        "## failure taxonomy (pooled)",
        "",
        "Share of the episodes with each failure code, one per episode by the precedence "
        "written in `grasp/eval/failures.py`, from the trajectories; per dataset in table.json.",
        "",
        *markdown_table(["baseline", *codes], cells),
    ]


def _type_counts(table: BaselineTable, part: str) -> dict[str, int]:
    """The comparison and other questions of a dataset's (or the pooled) section, as the
    first row that knows them counts them; macro and unknown types: none."""
    if part == "macro":
        return {}
    for row in table.rows:
        cells = _part(row, part) or {}
        known = {key: (cells.get(key) or {}).get("n") for key in TYPE_COUNTS}
        if all(n is not None for n in known.values()):
            return {_KIND[key]: n for key, n in known.items()}
    return {}


_KIND = {"em_comparison": "comparison", "em_other": "other"}


def _part(row: Mapping[str, Any], part: str) -> Mapping[str, Any] | None:
    """A row's values of one dataset, or its pooled or macro values."""
    return row[part] if part in ("pooled", "macro") else row["datasets"].get(part)


def _scored(row: Mapping[str, Any], part: str) -> Mapping[str, int] | None:
    """How many of a part's answers got a yes/no verdict (macro: the pooled counts)."""
    values = _part(row, "pooled" if part == "macro" else part)
    return None if values is None else values.get("jd_scored")


def _header(provenance: Mapping[str, Any]) -> list[str]:
    if not provenance:
        return ["No baseline has finished yet."]
    code = provenance["code"] or {}
    commit = code.get("git_commit") or "unknown (not a git checkout)"
    if code.get("git_dirty"):
        commit += " (with uncommitted changes)"
    protocol = provenance["protocol"]
    lines = [
        f"- policy (every baseline's backend): {describe(provenance['policy'])}",
        f"- judge: {describe(provenance['judge'])}",
        f"- code: git {commit}",
        f"- protocol: split {protocol['split']}, n={protocol['n']} per dataset "
        f"(seed {protocol['seed']}; all questions where fewer); each baseline's configuration "
        "is `config` in its results.json",
        "- cells: mean [95% bootstrap interval]; macro: mean of the dataset means (stratified "
        "bootstrap); wall s: rollout time as evaluate.py recorded it, summed over the runs of "
        "a resumed evaluation; model loading, index building and scoring not included "
        "(`k/n timed`: a run was killed before logging the time of n-k questions); JD "
        "`(k/n scored)`: the judge's reply to n-k answers was unparseable or failed, and JD is "
        "the mean over the k others",
        "- EM comparison / EM other: EM over the comparison questions (HotpotQA `comparison`, "
        "2WikiMultiHopQA `comparison` and `bridge_comparison`) and over the other questions "
        "(MuSiQue's all), each question's type looked up by its id in the dataset file; macro: "
        "over the datasets that have such questions. containment: answers that hold a gold "
        "answer or alias as whole tokens once both are normalized as for EM. reads ran / "
        "refused: read_paragraph calls per episode that ran, and that were refused with an "
        "error observation (tool-call counts include both). Where a results.json predates "
        "these, they are computed from its trajectories",
    ]
    for baseline, keys in provenance["differs"].items():
        lines.append(f"- `{baseline}` differs in {', '.join(keys)}: see its results.json")
    return lines


def _name(row: Mapping[str, Any]) -> str:
    return f"{row['label']} (`{row['baseline']}`)"


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _metric_cells(
    metrics: Mapping[str, Any] | None,
    macro: bool,
    scored: Mapping[str, int] | None,
    context: bool = False,
    counts: Mapping[str, int] | None = None,
) -> list[str]:
    width = len(METRICS) + len(BREAKDOWN) + 1 + (0 if macro else 1) + int(context)
    if metrics is None:
        return ["—"] * width
    cells = [_format(metrics[key]) for key, _ in METRICS[:3]]
    for key, _ in BREAKDOWN:
        cell = _format(metrics.get(key))
        n = (metrics.get(key) or {}).get("n")
        stated = (counts or {}).get(_KIND.get(key, ""))
        if not macro and n is not None and stated is not None and n != stated:
            cell += f" (n={n})"
        cells.append(cell)
    cells += [_format(metrics[key]) for key, _ in METRICS[3:]]
    cells.append(_format_reads(metrics))
    if context:
        cells.append(_format_tokens(metrics[CONTEXT[0]]))
    if scored is not None and scored["scored"] < scored["answers"]:
        jd = [key for key, _ in METRICS].index("jd")
        cells[jd] += f" ({scored['scored']}/{scored['answers']} scored)"
    if not macro:
        wall = _seconds(metrics.get("wall_time_s"))
        total = metrics.get("questions")
        timed = metrics.get("questions_timed", metrics.get("questions_rolled_out"))
        if metrics.get("questions_timed") == 0:
            wall = NOT_RECORDED  # no batch of this row's questions was timed: 0.0 would lie
        elif timed is not None and total is not None and timed < total:
            wall += f" ({timed}/{total} timed)"
        cells.append(wall)
    return cells


def _format_tokens(cell: Mapping[str, Any]) -> str:
    low, high = cell["ci"]
    return f"{cell['value']:.0f} [{low:.0f}, {high:.0f}]"


def _format_reads(metrics: Mapping[str, Any]) -> str:
    """``ran / refused`` read_paragraph calls per episode; "—" when neither is known."""
    ran, refused = (metrics.get(key) for key in READS)
    if ran is None or refused is None:
        return "—"
    return f"{ran['value']:.3f} / {refused['value']:.3f}"


def _format(cell: Mapping[str, Any] | None) -> str:
    if cell is None:
        return "—"
    value = cell["value"]
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if cell["ci"] is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{cell['ci'][0]:.3f}, {cell['ci'][1]:.3f}]"
