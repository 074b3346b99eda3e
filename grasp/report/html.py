"""One self-contained HTML report of a run or evaluation directory: ``report.html``.

    python scripts/report.py run_dir=runs/cpu_smoke

The file needs nothing but a browser: styles and script are inline and figures are inline
SVG. It holds the results tables (with 95% intervals where results.json has them), the
reward and tool-use curves of training, recall by turns used, and a trajectory viewer
(question, gold, each turn's text, parsed call or error and observation, the reward
breakdown) that filters by trajectory set and outcome. Every text from a run directory is
escaped: trajectories hold arbitrary model output.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grasp.env.episode import TurnRecord
from grasp.eval.results import RESULTS_FILE as EVALUATION_RESULTS_FILE
from grasp.report.assets import CSS, JS
from grasp.report.figures import (
    dev_curve_figure,
    figure_svg,
    recall_turns_figure,
    reward_figure,
    run_tools,
    tool_use_figure,
)
from grasp.report.load import (
    Outcome,
    RunData,
    RunKind,
    load_run,
    outcome,
    parse_errors,
    recall,
    recall_by_turns,
)
from grasp.report.tables import config_facts, results_table
from grasp.rollout.trajectory import Trajectory
from grasp.train.run_folder import CONFIG_FILE, DEV_CURVE_FILE, METRICS_FILE
from grasp.types import KEYWORD_EVIDENCE, SEMANTIC_EVIDENCE, evidence_kinds_in_order

EVIDENCE_LABELS = {SEMANTIC_EVIDENCE: "semantic hits", KEYWORD_EVIDENCE: "keyword hits"}
"""How the end of an episode names an evidence kind; any other kind by its name (``read``)."""

REPORT_FILE = "report.html"
OUTCOME_FILTERS = (
    ("all", "all outcomes"),
    (Outcome.CORRECT.value, "correct (EM)"),
    (Outcome.PARTIAL.value, "partial (F1 > 0)"),
    (Outcome.WRONG.value, "wrong"),
    (Outcome.NO_ANSWER.value, "no answer"),
    ("parse_errors", "with parse errors"),
)
"""Values of the viewer's outcome filter (the script matches data-outcome against them)."""
SIDEBAR_CHARS = 90
"""Questions longer than this are cut in the viewer's question list (not in the viewer)."""


def esc(value: object) -> str:
    """Text for HTML content or a quoted attribute: <, >, &, " and ' escaped."""
    return html.escape(str(value), quote=True)


def write_report(
    run_dir: Path, out: Path | None = None, max_trajectories: int | None = None
) -> Path:
    """Load ``run_dir`` and write its report (default ``run_dir/report.html``)."""
    run = load_run(Path(run_dir))
    path = Path(out) if out else run.path / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(run, max_trajectories), encoding="utf-8")
    return path


def render_report(run: RunData, max_trajectories: int | None = None) -> str:
    """The whole HTML document of ``run``; ``max_trajectories`` caps each set in the viewer."""
    sections = [
        ("overview", "Overview", _overview(run)),
        ("results", "Results", _results(run)),
        ("training", "Training curves", _training(run)),
        ("recall", "Recall by turns used", _recall(run)),
        ("trajectories", "Trajectories", _viewer(run, max_trajectories)),
        ("config", "Configuration", _config(run)),
    ]
    nav = "".join(f'<a href="#{key}">{title}</a>' for key, title, _ in sections)
    body = "".join(
        f'<section id="{key}"><h2>{title}</h2>{content}</section>'
        for key, title, content in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(run.title)} - grasp report</title><style>{CSS}</style></head><body>"
        f"<header><h1>{esc(run.title)}</h1>"
        f'<div class="muted">{esc(run.kind)} directory {esc(run.path)}</div>'
        f"<nav>{nav}</nav></header><main>{body}</main><script>{JS}</script></body></html>\n"
    )


def _notes(run: RunData) -> str:
    if not run.notes:
        return ""
    items = "".join(f"<li>{esc(note)}</li>" for note in run.notes)
    return f'<div class="notes"><b>Omitted:</b><ul>{items}</ul></div>'


def _overview(run: RunData) -> str:
    facts = config_facts(run)
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    counts = ", ".join(f"{esc(s.label)}: {len(s.trajectories)}" for s in run.trajectory_sets)
    if counts:
        rows += f"<dt>trajectories</dt><dd>{counts}</dd>"
    if run.metrics:
        rows += f"<dt>logged steps</dt><dd>{len(run.metrics)}</dd>"
    return f'{_notes(run)}<dl class="facts">{rows}</dl>'


def _results(run: RunData) -> str:
    evaluations = [e for e in run.evaluations if e.results is not None]
    if not evaluations:
        return f'<p class="muted">No {EVALUATION_RESULTS_FILE} to show.</p>'
    intro = (
        '<p class="muted">Means over episodes; brackets are 95% bootstrap intervals over '
        "questions. Recall counts gold paragraphs found by any tool.</p>"
    )
    return intro + results_table(evaluations)


def _figure(figure: Any, caption: str) -> str:
    if figure is None:
        return ""
    return f'<figure>{figure_svg(figure)}<figcaption class="muted">{esc(caption)}</figcaption></figure>'


def _training(run: RunData) -> str:
    if run.kind is RunKind.EVALUATION:
        return '<p class="muted">An evaluation directory has no training curves.</p>'
    if not run.metrics:
        return f'<p class="muted">{METRICS_FILE} has no training step yet.</p>'
    rewards = _figure(
        reward_figure(run.metrics),
        f"Reward and its terms per step, averaged over the step's episodes ({METRICS_FILE}).",
    )
    tools = _figure(
        tool_use_figure(run.metrics, tools=run_tools(run)),
        "Valid tool calls per episode, and the share of turns whose text was no tool call "
        "(parse errors) or whose call the environment refused.",
    )
    dev = _figure(
        dev_curve_figure(run.dev_curve),
        f"The dev learning curve ({DEV_CURVE_FILE}): the same held-out dev questions played "
        "greedily every few steps, under the training reward, pooled over their datasets.",
    )
    return (rewards + tools + dev) or '<p class="muted">No reward or tool metrics were logged.</p>'


def _recall(run: RunData) -> str:
    sets = run.recall_sets
    if not sets:
        return '<p class="muted">No trajectories to count turns in.</p>'
    figure = _figure(
        recall_turns_figure(sets),
        "Episodes grouped by the turns they used: mean share of gold paragraphs found with "
        "any tool, and how many episodes used that many turns.",
    )
    head = "".join(f"<th colspan=3>{esc(s.label)}</th>" for s in sets)
    sub = "<th>episodes</th><th>recall</th><th>all gold</th>" * len(sets)
    by_set = [{r.turns_used: r for r in recall_by_turns(s.trajectories)} for s in sets]
    rows = []
    for turns_used in sorted({t for table in by_set for t in table}):
        cells = []
        for table in by_set:
            row = table.get(turns_used)
            cells.append(
                f"<td>{row.episodes}</td><td>{row.recall:.3f}</td><td>{row.all_gold:.3f}</td>"
                if row
                else "<td>0</td><td></td><td></td>"
            )
        rows.append(f"<tr><td>{turns_used}</td>{''.join(cells)}</tr>")
    table = (
        f"<table><thead><tr><th rowspan=2>turns used</th>{head}</tr><tr>{sub}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return figure + table


def _viewer(run: RunData, max_trajectories: int | None) -> str:
    sets = [s for s in run.trajectory_sets if s.trajectories]
    if not sets:
        return '<p class="muted">No trajectories in this directory.</p>'
    options, entries, articles, capped = [], [], [], []
    for set_number, trajectory_set in enumerate(sets):
        shown = trajectory_set.trajectories[:max_trajectories]
        if len(shown) < len(trajectory_set.trajectories):
            capped.append(
                f"{trajectory_set.label}: first {len(shown)} of {len(trajectory_set.trajectories)}"
            )
        options.append(
            f'<option value="{esc(trajectory_set.key)}">{esc(trajectory_set.label)} '
            f"({len(shown)})</option>"
        )
        for number, trajectory in enumerate(shown):
            item_id = f"t{set_number}-{number}"
            entries.append(_sidebar_entry(item_id, trajectory))
            articles.append(_trajectory(item_id, trajectory_set.key, trajectory))
    outcome_options = "".join(
        f'<option value="{v}">{label}</option>' for v, label in OUTCOME_FILTERS
    )
    note = f'<p class="muted">Shown: {esc("; ".join(capped))}.</p>' if capped else ""
    return (
        f'{note}<div id="viewer"><div class="controls">'
        f'<label>set <select id="source-filter">{"".join(options)}</select></label>'
        f'<label>outcome <select id="outcome-filter">{outcome_options}</select></label>'
        f'<span id="visible-count" class="muted"></span></div>'
        f'<div class="viewer"><div class="sidebar"><ol id="question-list">{"".join(entries)}</ol>'
        f'</div><div id="trajectory-list">{"".join(articles)}</div></div></div>'
    )


def _sidebar_entry(item_id: str, trajectory: Trajectory) -> str:
    text = trajectory.question
    if len(text) > SIDEBAR_CHARS:
        text = text[: SIDEBAR_CHARS - 1] + "…"
    kind = outcome(trajectory)
    return (
        f'<li><span class="badge {kind.value}" title="{kind.value}">{esc(kind.value[0].upper())}</span>'
        f'<a class="qlink" href="#{item_id}" data-target="{item_id}">{esc(text)}</a></li>'
    )


def _trajectory(item_id: str, source: str, trajectory: Trajectory) -> str:
    kind = outcome(trajectory)
    errors = parse_errors(trajectory)
    reward = trajectory.reward
    summary = (
        f'<span class="badge {kind.value}">{kind.value.replace("_", " ")}</span>'
        f"<b>{esc(trajectory.question)}</b> "
        f'<span class="muted">F1 {reward.f1:.2f} · reward '
        f"{reward.total:.3f} · {trajectory.turns_used}/{trajectory.turn_budget} "
        f"turns{_count(errors, 'parse error')}</span>"
    )
    gold = set(trajectory.gold_paragraph_ids)
    facts = [
        ("question id", esc(trajectory.question_id)),
        ("gold answers", esc(" | ".join(trajectory.gold_answers))),
        ("gold paragraphs", _paragraphs(trajectory.gold_paragraph_ids, gold)),
        ("sample", f"group {trajectory.group_id}, sample {trajectory.sample_index}"),
    ]
    turns = "".join(_turn(n, turn, gold) for n, turn in enumerate(trajectory.turns, start=1))
    return (
        f'<details class="traj" id="{item_id}" data-source="{esc(source)}" '
        f'data-outcome="{kind.value}" data-parse-errors="{errors}"><summary>{summary}</summary>'
        f'<div class="body">{_facts(facts)}{turns}{_ending(trajectory, gold)}</div></details>'
    )


def _count(number: int, noun: str) -> str:
    """' · 2 parse errors', ' · 1 parse error', or nothing for 0."""
    if not number:
        return ""
    return f" · {number} {noun}{'s' if number != 1 else ''}"


def _facts(facts: Sequence[tuple[str, str]]) -> str:
    """A definition list; the values are HTML already escaped by the caller."""
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in facts)
    return f'<dl class="facts">{rows}</dl>'


def _paragraphs(paragraph_ids: Sequence[int], gold: set[int]) -> str:
    if not paragraph_ids:
        return '<span class="muted">none</span>'
    return ", ".join(
        f'<span class="gold">p{int(p)} (gold)</span>' if p in gold else f"p{int(p)}"
        for p in paragraph_ids
    )


def _turn(number: int, turn: TurnRecord, gold: set[int]) -> str:
    call, error = turn.call, turn.error
    if call:
        badge = f'<span class="badge tool">{esc(call.get("name"))}</span>'
    else:
        badge = f'<span class="badge error">{esc(error or "no call")}</span>'
    parts = [f'<div class="label">model text</div><pre class="text">{esc(turn.text)}</pre>']
    if call:
        parsed = json.dumps(call, ensure_ascii=False)
        parts.append(f'<div class="label">parsed call</div><pre class="call">{esc(parsed)}</pre>')
    if error:
        parts.append(f'<div class="label">error</div><pre class="error">{esc(error)}</pre>')
    if turn.observation:
        parts.append(
            f'<div class="label">observation</div><pre class="obs">{esc(turn.observation)}</pre>'
        )
    hits = list(dict.fromkeys(int(h["paragraph_id"]) for h in turn.hits))
    if hits:
        parts.append(f'<div class="label">paragraphs hit</div><div>{_paragraphs(hits, gold)}</div>')
    failed = " failed" if error else ""
    return f'<div class="turn{failed}"><h4>Turn {number} {badge}</h4>{"".join(parts)}</div>'


def _ending(trajectory: Trajectory, gold: set[int]) -> str:
    answer = trajectory.answer
    facts = [
        ("stop reason", esc(trajectory.stop_reason)),
        ("answer", esc(answer) if answer is not None else '<span class="muted">none</span>'),
        ("turns used", f"{trajectory.turns_used} of {trajectory.turn_budget}"),
        *(
            (EVIDENCE_LABELS.get(kind, kind), _paragraphs(trajectory.evidence_ids[kind], gold))
            for kind in evidence_kinds_in_order(trajectory.evidence_ids)
        ),
        ("recall", f"{recall(trajectory):.3f}"),
    ]
    cells = "".join(
        f"<tr><td>{esc(key)}</td><td>{float(value):.3f}</td></tr>"
        for key, value in trajectory.reward.as_dict().items()
    )
    return (
        f'<div class="label">end of episode</div>{_facts(facts)}'
        f'<table class="reward"><thead><tr><th>reward term</th><th>value</th></tr></thead>'
        f"<tbody>{cells}</tbody></table>"
    )


def _config(run: RunData) -> str:
    if run.config is None:
        return f'<p class="muted">No {CONFIG_FILE}.</p>'
    text = json.dumps(run.config, indent=2, sort_keys=True, default=str)
    return f"<details><summary>{CONFIG_FILE}</summary><pre>{esc(text)}</pre></details>"
