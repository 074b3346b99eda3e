"""results.md: the evaluation's results as markdown tables, with what produced them.

The header names the policy and its checkpoint (path or hub id, revision, checksums), the
judge and its prompt version, the git commit of the code and the protocol settings. The first
table has one row per dataset (then pooled and macro rows when there are several): every mean
with its 95% bootstrap interval, EM split into comparison and other questions and answer
containment among them. The second table has tool calls per episode, the read_paragraph calls
that ran and those refused, parse errors, stop reasons and cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grasp.eval.results import (
    CONFIG_FILE,
    RESULTS_FILE,
    DatasetResults,
    Interval,
    MacroResults,
    Mean,
    PooledResults,
    Summary,
)

QUALITY_COLUMNS = (
    ("EM", "em"),
    ("F1", "f1"),
    ("JD", "jd"),
    ("EM comparison", "em_comparison"),
    ("EM other", "em_other"),
    ("containment", "containment"),
    ("recall", "recall"),
    ("all gold", "recall_all_gold"),
    ("read recall", "read_recall"),
    ("SS recall", "supporting_sentence_recall"),
    ("turns", "turns_per_episode"),
)
"""(column header, result key) of the quality table."""


def format_interval(value: Any, interval: Interval | Mapping[str, float] | None) -> str:
    """``0.412 [0.371, 0.455]``; a string value (not computed, not available) as it is."""
    if isinstance(value, str):
        return value
    if isinstance(value, Interval):  # a macro entry
        value, interval = value.mean, value
    elif isinstance(value, Mapping):  # a macro entry as results.json holds it
        value, interval = value["mean"], value
    if interval is None:
        return f"{value:.3f}"
    if isinstance(interval, Interval):
        return f"{value:.3f} [{interval.low:.3f}, {interval.high:.3f}]"
    return f"{value:.3f} [{interval['low']:.3f}, {interval['high']:.3f}]"


def describe(identity: Any) -> str:
    """``key=value, ...`` of a (nested) provenance record; nested keys are dotted."""
    if not identity:
        return "not recorded"
    if not isinstance(identity, Mapping):
        return str(identity)
    flat: dict[str, Any] = {}

    def walk(tree: Mapping[str, Any], prefix: str) -> None:
        for key, value in tree.items():
            if isinstance(value, Mapping):
                walk(value, f"{prefix}{key}.")
            elif value is not None:
                flat[prefix + key] = value

    walk(identity, "")
    return ", ".join(f"{key}={value}" for key, value in flat.items())


def _quality_row(label: str, results: Summary | MacroResults, questions: str) -> str:
    cells = [label, questions]
    for _, key in QUALITY_COLUMNS:
        if isinstance(results, MacroResults):
            cells.append(format_interval(results.means.get(key, "n/a"), None))
            continue
        interval = results.ci.get(key)
        cell = _figure_interval(getattr(results, key), interval)
        if interval and interval.n != results.episodes:
            # JD leaves out unparseable verdicts, SS recall questions without sentence facts.
            cell += f" (n={interval.n})"
        cells.append(cell)
    return "| " + " | ".join(cells) + " |"


def _figure_interval(value: Any, interval: Interval | None) -> str:
    """``format_interval``, or "not recorded" for a field that results written before it
    existed lack (None)."""
    return "not recorded" if value is None else format_interval(value, interval)


def _reads(results: Summary) -> str:
    """``ran / refused`` read_paragraph calls per episode."""
    ran, refused = results.reads_run_per_episode, results.reads_refused_per_episode
    if ran is None or refused is None:
        return "not recorded"
    return f"{ran:.2f} / {refused:.2f}"


def _figure(value: Any, spec: str) -> str:
    """A number in ``spec``; a string ("not recorded") as it is; absent: "not recorded"."""
    if value is None:
        return "not recorded"
    return value if isinstance(value, str) else format(value, spec)


def _cost_row(label: str, results: Summary, tools: Sequence[str]) -> str:
    calls = results.tool_calls_per_episode
    stops = ", ".join(f"{k} {v:.2f}" for k, v in results.stop_reasons.items())
    judge = results.judge or {}
    cells = [label, *(f"{calls.get(tool, 0.0):.2f}" for tool in tools)]
    cells += [
        _reads(results),
        f"{results.parse_error_rate:.3f}",
        f"{results.invalid_call_rate:.3f}",
        f"{judge['unparseable']} / {judge['error']}" if judge else "-",
        stops,
        _figure(results.generated_tokens_per_episode, ".0f"),
        _figure(_wall_per_question(results), ".3f"),
    ]
    return "| " + " | ".join(cells) + " |"


def _wall_per_question(results: Summary) -> Mean | None:
    """Rows with a cost have a wall time; a bare summary has none."""
    if isinstance(results, DatasetResults | PooledResults):
        return results.wall_time_per_question_s
    return None


def _header(provenance: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    code = provenance.get("code") or {}
    commit = code.get("git_commit") or "unknown (not a git checkout)"
    if code.get("git_dirty"):
        commit += " (with uncommitted changes)"
    env = config.get("env", {})
    tools = ", ".join(str(tool) for tool in env.get("tools", ()))
    lines = [
        f"- policy: {describe(provenance.get('policy'))}",
        f"- judge: {describe(provenance.get('judge'))}",
        f"- code: git {commit}",
        f"- protocol: split {config.get('split')}, n={config.get('n')} per dataset "
        f"(seed {config.get('seed')}; all questions where fewer), tools [{tools}], "
        f"top-K {env.get('top_k')}, turn budget {env.get('turn_budget')}, "
        f"scope {env.get('scope')}",
        f"- configuration: `config` in {RESULTS_FILE} (per dataset also {CONFIG_FILE})",
        "- intervals: 95% bootstrap over questions (macro: stratified by dataset); "
        "SS recall: supporting-sentence recall, questions with sentence-level facts only",
        "- EM comparison / EM other: EM over comparison questions (type comparison or "
        "bridge_comparison) and over the others, `(n=...)` of them; containment: answers that "
        "hold a gold answer (or alias) as whole tokens after normalization",
        "- tool calls per episode count every valid call, refused ones too; reads ran / "
        "refused: read_paragraph calls that ran, and those refused with an error observation",
    ]
    return lines


def results_markdown(
    title: str,
    rows: Sequence[tuple[str, Summary]],
    provenance: Mapping[str, Any],
    config: Mapping[str, Any],
    macro: MacroResults | None = None,
) -> str:
    """The whole results.md: header, the quality table, then the tool-use and cost table.

    ``rows`` are (label, summary) pairs, e.g. each dataset then ("overall (pooled)", ...); a
    row without wall time (a bare ``Summary``) says "not recorded"; ``macro`` is
    ``macro_summary``'s output, added as the last quality row when given.
    """
    lines = [f"# {title}", "", *_header(provenance, config), ""]
    head = ["", "questions", *(name for name, _ in QUALITY_COLUMNS)]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for label, results in rows:
        lines.append(_quality_row(label, results, str(results.episodes)))
    if macro is not None:
        datasets = len(macro.datasets.get("em", []))
        lines.append(_quality_row("overall (macro)", macro, f"{datasets} datasets"))
    tools = sorted({tool for _, r in rows for tool in r.tool_calls_per_episode})
    cost_head = [
        "",
        *tools,
        "reads ran / refused",
        "parse errors / turn",
        "refused calls / turn",
        "JD unparseable / failed",
        "stop reasons",
        "generated tokens",
        "wall s / question",
    ]
    lines += ["", "Tool calls per episode, errors, stops and cost:", ""]
    lines.append("| " + " | ".join(cost_head) + " |")
    lines.append("|" + "---|" * len(cost_head))
    lines += [_cost_row(label, results, tools) for label, results in rows]
    return "\n".join(lines) + "\n"
