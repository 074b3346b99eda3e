"""curves.png and the report's dev figure: the dev learning curve drawn beside training's."""

from __future__ import annotations

import json

import pytest
from matplotlib.image import imread

from grasp.report.figures import dev_curve_figure
from grasp.train.metrics_log import read_dev_curve
from grasp.train.plots import DEV_PANELS, dev_points, panels_for, plot_run
from grasp.train.run_folder import DEV_CURVE_FILE, METRICS_FILE

HEIGHT_PER_PANEL = 3 * 110  # plot_run: 3 inches per panel at 110 dpi


def _curve_line(step: int, reward: float, recall: float, tokens: float | None) -> dict:
    pooled = {"episodes": 96, "reward/total": reward, "reward/R_R": reward / 2, "recall": recall}
    if tokens is not None:
        pooled["context_tokens"] = tokens
    return {"step": step, "pooled": pooled, "hotpotqa": dict(pooled, episodes=32)}


def _write_run(run_dir, curve: list[dict]) -> None:
    records = [{"step": s, "reward/total": 0.1 * s, "loss": 0.01} for s in range(1, 5)]
    (run_dir / METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    (run_dir / DEV_CURVE_FILE).write_text("".join(json.dumps(line) + "\n" for line in curve))


def test_the_dev_curve_is_read_in_step_order_and_a_bad_line_names_itself(tmp_path):
    assert read_dev_curve(tmp_path) == []
    lines = [_curve_line(25, 0.5, 0.6, 600.0), _curve_line(0, 0.4, 0.62, 589.0)]
    _write_run(tmp_path, lines)
    assert [line["step"] for line in read_dev_curve(tmp_path)] == [0, 25]
    (tmp_path / DEV_CURVE_FILE).write_text(json.dumps(lines[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"dev_curve.jsonl: line 2 is not a dev curve line"):
        read_dev_curve(tmp_path)


def test_dev_points_skip_the_steps_without_the_value():
    curve = [_curve_line(0, 0.4, 0.62, 589.0), _curve_line(25, 0.5, 0.6, None)]
    assert dev_points(curve, "reward/total") == ([0, 25], [0.4, 0.5])
    assert dev_points(curve, "context_tokens") == ([0], [589.0])
    assert dev_points(curve, "read_recall") == ([], [])


def test_curves_png_gains_the_dev_panels_that_have_values(tmp_path):
    _write_run(tmp_path, [])
    plot_run(tmp_path)
    # Training alone: the reward and optimization panels.
    assert imread(tmp_path / "curves.png").shape[0] == 2 * HEIGHT_PER_PANEL
    _write_run(tmp_path, [_curve_line(0, 0.4, 0.62, 589.0), _curve_line(25, 0.5, 0.6, 625.0)])
    plot_run(tmp_path)
    # Every dev panel has a value: reward, evidence, context tokens.
    assert len(DEV_PANELS) == 3
    assert imread(tmp_path / "curves.png").shape[0] == (2 + 3) * HEIGHT_PER_PANEL
    _write_run(tmp_path, [_curve_line(0, 0.4, 0.62, None)])
    plot_run(tmp_path)
    assert imread(tmp_path / "curves.png").shape[0] == (2 + 2) * HEIGHT_PER_PANEL


def test_the_report_figure_draws_each_pooled_value_at_its_step():
    assert dev_curve_figure([]) is None
    curve = [_curve_line(0, 0.4, 0.62, 589.0), _curve_line(25, 0.5, 0.6, 625.0)]
    figure = dev_curve_figure(curve)
    axes = figure.axes
    assert [axis.get_title().split(" (")[0] for axis in axes] == [t for t, _ in DEV_PANELS]
    assert all("(96 questions, greedy, pooled)" in axis.get_title() for axis in axes)
    drawn = {
        line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
        for axis in axes
        for line in axis.get_lines()
    }
    assert drawn == {
        "total": ([0, 25], [0.4, 0.5]),
        "R_R": ([0, 25], [0.2, 0.25]),
        "recall": ([0, 25], [0.62, 0.6]),
        "context_tokens": ([0, 25], [589.0, 625.0]),
    }


def test_the_entropy_curve_has_its_own_panel_when_logged():
    records = [{"step": 1, "reward/total": 0.5, "loss": 0.1, "entropy": 0.4}]
    titles = [title for title, _ in panels_for(records)]
    assert titles == ["reward", "optimization", "policy entropy (mean over completion tokens)"]
    assert "policy entropy" not in " ".join(t for t, _ in panels_for([{"reward/total": 0.5}]))
