"""scripts/k_sweep.py: one baseline sweep per k, read back into one table.

The end-to-end test runs the sweep with the heuristic search agent (policy=scripted, no model)
on the tiny corpus at two values of k and checks that each k's evaluation searched with its
own k. The table test reads hand-written table.json files, so its trigger rates are exact.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grasp.data import write_normalized
from grasp.experiments.k_sweep import read_k_sweep, render_k_sweep, write_k_sweep
from grasp.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "k_sweep.py"


def cell(value, low, high):
    return {"value": value, "ci": [low, high]}


def table(k: int, rate: float, episodes: int) -> dict:
    """A table.json as scripts/baselines.py writes it: CRAG with a trigger rate, none without."""
    crag = {
        "em": cell(0.1 * k, 0.0, 0.5),
        "f1": cell(0.2, 0.1, 0.3),
        "recall": cell(0.5, 0.4, 0.6),
        "context_tokens": cell(100.0 * k, 90.0 * k, 110.0 * k),
        "trigger_rate": {"rate": rate, "episodes": episodes},
    }
    return {
        "datasets": ["hotpotqa"],
        "rows": [
            {"baseline": "none", "status": "finished", "datasets": {"hotpotqa": {}}},
            {"baseline": "crag", "status": "finished", "datasets": {"hotpotqa": crag}},
        ],
    }


def test_the_sweep_table_lays_each_k_side_by_side(tmp_path):
    for k, rate in ((3, 0.25), (10, 0.75)):
        (tmp_path / f"k{k}").mkdir()
        (tmp_path / f"k{k}" / "table.json").write_text(json.dumps(table(k, rate, 8)))
    rows = read_k_sweep(tmp_path, [3, 10], ["crag", "none"])
    assert [(r.baseline, r.k, r.part) for r in rows] == [
        ("crag", 3, "hotpotqa"),
        ("crag", 10, "hotpotqa"),
        ("none", 3, "hotpotqa"),
        ("none", 10, "hotpotqa"),
    ]
    assert [(r.trigger_rate, r.trigger_episodes) for r in rows] == [
        (0.25, 8),
        (0.75, 8),
        (None, None),
        (None, None),
    ]
    assert rows[1].cells["em"] == cell(1.0, 0.0, 0.5)
    markdown = render_k_sweep(rows, tmp_path)
    assert "| `crag` | 3 | finished | 0.250 (8) | 0.300 [0.000, 0.500] |" in markdown
    assert "| 300 [270, 330] |" in markdown  # context tokens without decimals
    assert "| `none` | 10 | finished | — | — | — | — | — |" in markdown
    write_k_sweep(rows, tmp_path)
    assert json.loads((tmp_path / "k_sweep.json").read_text())[0]["trigger_rate"] == 0.25


def test_a_missing_k_or_row_is_named(tmp_path):
    (tmp_path / "k3").mkdir()
    (tmp_path / "k3" / "table.json").write_text(json.dumps(table(3, 0.5, 2)))
    with pytest.raises(FileNotFoundError, match="k=5"):
        read_k_sweep(tmp_path, [3, 5], ["crag"])
    with pytest.raises(ValueError, match="no self_rag row"):
        read_k_sweep(tmp_path, [3], ["self_rag"])


@pytest.mark.parametrize(
    ("override", "message"),
    [("ks=[3,3]", "distinct"), ("ks=[0]", "ks"), ("baselines=[crg]", "crg")],
)
def test_bad_sweeps_are_refused_naming_the_field(tmp_path, override, message):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), f"root={tmp_path}", override],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert message in result.stderr
    assert not any(tmp_path.iterdir())


def test_each_k_is_evaluated_with_its_own_top_k(tmp_path, tiny_questions, tiny_index_dir):
    write_normalized(list(tiny_questions), tmp_path / "data" / "hotpotqa" / "dev.jsonl")
    (tmp_path / "indexes").mkdir()
    (tmp_path / "indexes" / "hotpotqa-dev").symlink_to(tiny_index_dir)
    root = tmp_path / "sweep"
    overrides = f'overrides=["policy=scripted","data_dir={tmp_path / "data"}","index_root={tmp_path / "indexes"}"]'
    command = [sys.executable, str(SCRIPT), f"root={root}", "ks=[1,2]", "baselines=[none]", "n=2"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [*command, overrides], capture_output=True, text=True, timeout=900, env=env
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    for k in (1, 2):
        evaluation = root / f"k{k}" / "none"
        config = json.loads((evaluation / "results.json").read_text())["config"]
        assert config["env"]["top_k"] == k
        assert (root / f"k{k}" / "table.md").exists()
        lines = (evaluation / "hotpotqa" / "trajectories.jsonl").read_text().splitlines()
        assert len(lines) == 2
    rows = json.loads((root / "k_sweep.json").read_text())
    assert [(r["baseline"], r["k"], r["status"]) for r in rows] == [
        ("none", 1, "finished"),
        ("none", 2, "finished"),
    ]
    assert "## hotpotqa" in result.stdout
    before = (root / "k_sweep.md").read_text()
    (root / "k_sweep.md").unlink()
    rebuilt = subprocess.run(
        [*command, overrides, "table_only=true"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert (root / "k_sweep.md").read_text() == before
