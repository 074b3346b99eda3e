"""The rollout benchmark (grasp/bench/rollout.py, scripts/bench_rollout.py) in its dry run: the
three variants timed side by side on the same batch, drawing the same ids, with their parts."""

from __future__ import annotations

import json
import os
import runpy
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore

from grasp.bench.rollout import PARTS, BenchRolloutConfig, run_benchmark, table
from grasp.config import to_dataclass
from grasp.paths import REPO_ROOT


@pytest.fixture(scope="module")
def report():
    return json.loads(json.dumps(run_benchmark(BenchRolloutConfig(dry_run=True, repeats=2))))


def test_every_variant_is_timed_on_the_same_batch_part_by_part(report) -> None:
    [batch] = report["batches"]
    assert batch["rows"] == 3 and len(set(batch["context_tokens"])) > 1  # ragged: padding
    assert list(batch["variants"]) == ["before", "after", "plain"]
    for run in batch["variants"].values():
        assert run["generated_tokens"] > 0 and run["tokens_per_s"] > 0
        assert len(run["all_seconds"]) == 2 and run["seconds"] in run["all_seconds"]
        assert set(run["parts_s"]) == set(PARTS)
        # The parts add up to the call (the rest is the timer's own start and stop).
        assert sum(run["parts_s"].values()) == pytest.approx(run["seconds"], rel=0.2, abs=0.01)
        assert run["forwards"] == 6  # the prefill and 5 decoding forwards for 6 new tokens
        points = run["memory_per_forward_gib"]["points"]
        assert [p[0] for p in points] == list(range(6))
        assert "rss_growth_peak_gib" in run
    assert batch["variants"]["plain"]["parts_s"]["logprob"] == 0
    assert batch["variants"]["before"]["parts_s"]["logprob"] > 0
    assert set(batch["speedup"]) == {
        "after_vs_before",
        "plain_vs_before",
        "before_vs_plain",
        "after_vs_plain",
    }


def test_the_variants_draw_the_same_ids_and_log_probabilities(report) -> None:
    [batch] = report["batches"]
    after, plain = batch["equal_to_before"]["after"], batch["equal_to_before"]["plain"]
    assert after == {"rows_with_equal_ids": 3, "rows": 3, "max_abs_logprob_diff": 0.0}
    assert plain["rows_with_equal_ids"] == 3 and plain["max_abs_logprob_diff"] is None


def test_the_report_records_its_machine_and_settings(report) -> None:
    assert report["settings"]["device"] == "cpu" and report["settings"]["dry_run"] is True
    assert report["settings"]["vocab_size"] == 512  # the dry run's sizes
    assert isinstance(report["contended"], bool) and report["note"]
    assert "load_average_1_5_15_min" in report["environment"]


def test_the_table_has_a_row_per_variant(report) -> None:
    text = table(report)
    rows = [line for line in text.splitlines() if line.startswith("| 3 |")]
    assert [row.split("|")[2].strip() for row in rows] == ["before", "after", "plain"]
    assert "after ids equal to before's on 3/3 rows" in text


def test_the_config_composes_and_is_checked() -> None:
    ConfigStore.instance().store(name="bench_rollout_schema", node=BenchRolloutConfig)
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        config = to_dataclass(
            compose("bench_rollout", overrides=["batches=[2,4]"]), BenchRolloutConfig
        )
    assert config.batches == [2, 4] and config.variants == ["before", "after", "plain"]
    with pytest.raises(ValueError, match="variants"):
        BenchRolloutConfig(variants=["fast"])
    with pytest.raises(ValueError, match="batches"):
        BenchRolloutConfig(batches=[0])


def test_the_script_runs_its_dry_run(tmp_path, monkeypatch, capsys) -> None:
    """scripts/bench_rollout.py as ``python scripts/bench_rollout.py dry_run=true ...`` runs
    it, in this process (its environment settings kept out of the other tests')."""
    out = tmp_path / "rollout.json"
    monkeypatch.setattr(os, "environ", dict(os.environ))
    # Hydra's stdout log handler cannot wrap pytest's captured stdout: logging off.
    arguments = ["dry_run=true", "variants=[before,after]", f"out={out}"]
    arguments += ["hydra/job_logging=none", "hydra/hydra_logging=none"]
    monkeypatch.setattr(sys, "argv", ["bench_rollout.py", *arguments])
    runpy.run_path(str(REPO_ROOT / "scripts" / "bench_rollout.py"), run_name="__main__")
    assert "| 3 | after |" in capsys.readouterr().out
    written = json.loads(out.read_text())
    assert list(written["batches"][0]["variants"]) == ["before", "after"]
    assert "after_vs_before" in written["batches"][0]["speedup"]
