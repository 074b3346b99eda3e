"""scripts/report.py: its config composes, and a run writes the report where it says."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from omegaconf.errors import MissingMandatoryValue

from grasp.config import ReportConfig, register_configs, to_dataclass
from grasp.paths import REPO_ROOT

register_configs()


def _compose(overrides: list[str]) -> ReportConfig:
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        return to_dataclass(compose("report", overrides=overrides), ReportConfig)


def test_config_defaults_and_overrides():
    config = _compose(["run_dir=runs/cpu_smoke", "max_trajectories=5"])
    assert (config.run_dir, config.out, config.max_trajectories) == ("runs/cpu_smoke", None, 5)


def test_run_dir_is_required():
    with pytest.raises(MissingMandatoryValue, match="run_dir"):
        _compose([])


def test_the_script_writes_the_report(run_dir, tmp_path):
    out = tmp_path / "nested" / "report.html"
    done = subprocess.run(
        [sys.executable, "scripts/report.py", f"run_dir={run_dir}", f"out={out}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(out)
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "report_fixture (run)" in text
    assert not (run_dir / "nested").exists()
