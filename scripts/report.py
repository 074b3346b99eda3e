"""Write a self-contained HTML report of a training run or an evaluation directory.

    python scripts/report.py run_dir=runs/cpu_smoke
    python scripts/report.py run_dir=runs/eval-scripted out=/tmp/eval-scripted.html
    python scripts/report.py run_dir=runs/cpu_learn max_trajectories=50

Writes <run_dir>/report.html (or out=): results tables with 95% intervals, the reward and
tool-use curves of training, recall by turns used and a trajectory viewer, filterable by
outcome. One file, no network: styles, script and figures (SVG) are inline. Parts the
directory lacks are left out, with a note.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig

from grasp.config import ReportConfig, register_configs, to_dataclass
from grasp.report import write_report

log = logging.getLogger("report")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="report")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, ReportConfig)
    out = Path(config.out) if config.out else None
    path = write_report(Path(config.run_dir), out, max_trajectories=config.max_trajectories)
    log.info("%s: %.1f kB", path, path.stat().st_size / 1000)
    print(path)


if __name__ == "__main__":
    main()
