"""The HTML report as text: contents, escaping, self-containment, and the results table."""

from __future__ import annotations

import html
import json
import re
import shutil

import pytest
from report_fixture import INJECTION

from grasp.report import load_run, render_report, write_report
from grasp.report.figures import (
    figure_svg,
    recall_turns_figure,
    reward_figure,
    tool_keys,
    tool_use_figure,
)

QUESTIONS_PER_SET = 3
CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]*)""")
ATTRIBUTE = re.compile(
    r"""\s(src|href|xlink:href|action|srcset|poster|data)\s*=\s*["']?([^"'\s>]*)"""
)


@pytest.fixture(scope="module")
def report(run_dir) -> str:
    path = write_report(run_dir)
    assert path == run_dir / "report.html"
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def evaluation_report(run_dir, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("evaluation-report") / "evaluation.html"
    return write_report(run_dir / "eval_after", out).read_text(encoding="utf-8")


def test_every_question_is_in_the_viewer(report, tiny_questions):
    for question in tiny_questions:
        escaped = html.escape(question.question)
        # In eval_after, eval_before and (for the first two) both step samples.
        expected = 4 if question.question_id != "q-python" else 2
        assert report.count(f"<b>{escaped}</b>") == expected


def test_model_text_is_escaped(report):
    assert INJECTION not in report
    assert html.escape(INJECTION) in report
    assert report.count("<script>") == 1  # the report's own script


def test_nothing_is_loaded_from_elsewhere(report, evaluation_report):
    for text in (report, evaluation_report):
        assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", text, re.IGNORECASE)
        assert "<link" not in text and "@import" not in text
        for name, value in ATTRIBUTE.findall(text):
            assert name in ("href", "xlink:href") and value.startswith("#"), (name, value)
        references = CSS_URL.findall(text)
        assert references and all(r.startswith("#") for r in references)  # SVG clip paths


def test_sections_of_a_training_run(report):
    for anchor in ("overview", "results", "training", "recall", "trajectories", "config"):
        assert f'<section id="{anchor}">' in report
    assert report.count("<svg") == 3  # reward terms, tool use, recall by turns
    assert "Omitted:" not in report
    assert '<option value="eval_after">after training (3)</option>' in report
    assert '<option value="step_4">sample at step 4 (2)</option>' in report
    assert report.count('class="traj"') == 3 + 3 + 2 + 2


def _ci(interval: dict, digits: int = 3) -> str:
    return f'<span class="ci">[{interval["low"]:.{digits}f}, {interval["high"]:.{digits}f}]</span>'


def test_results_table_has_both_evaluations_intervals_and_the_change(report, run_dir):
    before = json.loads((run_dir / "eval_before" / "results.json").read_text())
    after = json.loads((run_dir / "eval_after" / "results.json").read_text())
    em_row = (
        f"<tr><td>EM</td><td>0.000{_ci(before['ci']['em'])}</td>"
        f'<td>0.333{_ci(after["ci"]["em"])}</td><td class="delta-pos">+0.333</td></tr>'
    )
    assert em_row in report
    total = "reward/total"
    change = after["reward"][total] - before["reward"][total]
    total_row = (
        f"<tr><td>{total}</td><td>{before['reward'][total]:.3f}{_ci(before['reward_ci'][total])}</td>"
        f"<td>{after['reward'][total]:.3f}{_ci(after['reward_ci'][total])}</td>"
    )
    assert total_row in report
    assert f"{change:+.3f}</td></tr>" in report.split(total_row)[1][:60]
    # Stop reasons absent from one evaluation are a share of 0, not a blank.
    assert "<tr><td>turn_budget</td><td>0.000</td><td>0.333</td>" in report
    assert "<tr><td>episodes</td><td>3</td><td>3</td>" in report


def test_figures_not_measured_say_so(report, run_dir, tmp_path):
    """Issue 18 §4: the scripted agent counts no tokens; the report must not show 0.0."""
    missing = '<td class="missing">not recorded</td>'
    for label in ("generated tokens per episode", "prompt tokens per episode"):
        assert f"<tr><td>{label}</td>{missing}{missing}<td></td></tr>" in report
    # An older results.json wrote 0.0 for them; its trajectories show nothing was counted.
    old = tmp_path / "eval"
    shutil.copytree(run_dir / "eval_after", old)
    results = json.loads((old / "results.json").read_text())
    results.update(generated_tokens_per_episode=0.0, prompt_tokens_per_episode=0.0)
    (old / "results.json").write_text(json.dumps(results))
    text = write_report(old, tmp_path / "report.html").read_text(encoding="utf-8")
    assert f"<tr><td>generated tokens per episode</td>{missing}</tr>" in text
    assert f"<tr><td>prompt tokens per episode</td>{missing}</tr>" in text


def test_trajectory_details(report):
    # The partial answer: its parse error, its hits with gold marked, its reward breakdown.
    assert '<span class="badge error">malformed_json</span>' in report
    assert '<span class="badge tool">read_paragraph</span>' in report
    assert "(gold)</span>" in report
    assert '<span class="badge partial">partial</span>' in report
    assert "<dt>answer</dt><dd>Auckland city</dd>" in report
    assert "<tr><td>answer/f1</td><td>0.667</td></tr>" in report
    assert 'data-outcome="no_answer" data-parse-errors="4"' in report
    assert (
        "4/4 turns · 4 parse errors</span>" in report
        and "3/4 turns · 1 parse error</span>" in report
    )


def test_an_evaluation_directory_has_no_training_parts(evaluation_report):
    assert "An evaluation directory has no training curves." in evaluation_report
    assert "Omitted:" in evaluation_report and "training curves omitted" in evaluation_report
    assert evaluation_report.count("<svg") == 1  # recall by turns only
    assert '<option value="evaluation">evaluation (3)</option>' in evaluation_report
    assert evaluation_report.count('class="traj"') == QUESTIONS_PER_SET
    assert "<th>evaluation</th>" in evaluation_report and 'class="delta-' not in evaluation_report


def test_max_trajectories_caps_each_set(run_dir):
    text = render_report(load_run(run_dir), max_trajectories=1)
    assert text.count('class="traj"') == 4
    assert "first 1 of 3" in text and "first 1 of 2" in text


def test_figures_are_none_without_data(run_dir):
    run = load_run(run_dir)
    assert reward_figure([]) is None
    assert tool_use_figure([]) is None
    assert recall_turns_figure([]) is None
    assert tool_keys(run.metrics, ["semantic_search", "answer"]) == [
        "tools/semantic_search_per_episode",
        "tools/answer_per_episode",
    ]
    # Without the offered tools, the ones ever used (search is never called here).
    assert "tools/search_per_episode" not in tool_keys(run.metrics)
    svg = figure_svg(reward_figure(run.metrics))
    assert svg.startswith("<svg") and "<metadata>" not in svg and "http" not in svg


def test_a_multi_dataset_evaluation_shows_its_pooled_results(tmp_path):
    """The folder of every dataset (its results.json has datasets and overall, no trajectories
    of its own) shows the pooled results, not blank cells; its baseline counted no tokens."""
    from grasp.eval.results import EvaluationResults
    from grasp.paths import REPO_ROOT

    folder = REPO_ROOT / "results" / "baselines" / "hf" / "ircot"
    pooled = EvaluationResults.from_json(json.loads((folder / "results.json").read_text()))
    pooled = pooled.overall.pooled
    text = write_report(folder, tmp_path / "report.html").read_text(encoding="utf-8")
    ci = pooled.ci["em"]
    em = f'<td>{pooled.em:.3f}<span class="ci">[{ci.low:.3f}, {ci.high:.3f}]</span></td>'
    assert f"<tr><td>EM</td>{em}</tr>" in text
    assert f"<tr><td>episodes</td><td>{pooled.episodes}</td></tr>" in text
    missing = '<td class="missing">not recorded</td>'
    assert f"<tr><td>generated tokens per episode</td>{missing}</tr>" in text
    assert f"<tr><td>prompt tokens per episode</td>{missing}</tr>" in text
