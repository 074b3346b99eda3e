"""The corrective baselines at several k: how often their rewrite trigger fires as k grows.

    python scripts/k_sweep.py root=results/baselines/k_sweep   # CRAG, Self-RAG; k = 3, 5, 10
    python scripts/k_sweep.py 'ks=[5,20]' n=20 'overrides=[policy=scripted]'
    python scripts/k_sweep.py root=results/baselines/k_sweep table_only=true

For each k of ``ks``, scripts/baselines.py evaluates ``baselines`` on ``datasets`` (n questions
each, seed 42) with env.top_k=k into <root>/k<k>/ (its own table.md, provenance and resume:
a finished row is skipped, an interrupted one resumes), with no trained rows. Then
<root>/k_sweep.json and k_sweep.md lay the rows side by side: per baseline and k, the trigger
rate, EM, F1, recall and context tokens (grasp/experiments/k_sweep.py).
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import subprocess
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from grasp.config import KSweepConfig, register_configs, to_dataclass
from grasp.experiments.k_sweep import k_folder, read_k_sweep, write_k_sweep
from grasp.paths import REPO_ROOT

register_configs()


def baselines_command(config: KSweepConfig, k: int) -> list[str]:
    """The scripts/baselines.py run of one k."""
    return [
        sys.executable,
        str(REPO_ROOT / "scripts" / "baselines.py"),
        f"sweep_dir={k_folder(Path(config.root), k)}",
        f"env.top_k={k}",
        f"baselines=[{','.join(config.baselines)}]",
        f"datasets=[{','.join(config.datasets)}]",
        f"n={config.n}",
        "~trained",
        "paired=[]",
        *config.overrides,
    ]


@hydra.main(version_base=None, config_path="../configs", config_name="k_sweep")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, KSweepConfig)
    root = Path(config.root)
    if not config.table_only:
        for k in config.ks:
            print(f"k={k}: {k_folder(root, k)}", flush=True)
            subprocess.run(baselines_command(config, k), check=True)
    rows = read_k_sweep(root, config.ks, config.baselines)
    write_k_sweep(rows, root)
    print((root / "k_sweep.md").read_text(), end="")


if __name__ == "__main__":
    main()
