"""Store every finished evaluation's trajectories.jsonl under a folder as trajectories.jsonl.xz.

    python scripts/compress_results.py                 # results/, before committing results
    python scripts/compress_results.py root=runs/eval  # any other folder

Finished means a results.json beside the file. Trajectories compress about 10x, and every
reader (evaluation, resume, tables, comparisons, the report) reads both forms
(grasp/compressed.py); tests/test_repository_size.py fails CI when a plain one is committed
under results/. A folder an evaluation is writing is refused, not touched.
"""

from __future__ import annotations

import os

from grasp.startup import process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

from pathlib import Path

import hydra
from omegaconf import DictConfig

from grasp.config import CompressConfig, register_configs, to_dataclass
from grasp.eval.policy_eval import compress_finished

register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="compress_results")
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, CompressConfig)
    root = Path(config.root)
    if not root.is_dir():
        raise SystemExit(f"root={config.root} is not a folder")
    before = {p: p.stat().st_size for p in root.rglob("trajectories.jsonl")}
    written = compress_finished(root)
    plain = sum(before[p.with_suffix("")] for p in written)
    packed = sum(p.stat().st_size for p in written)
    print(f"{len(written)} trajectory files compressed: {plain:,} B -> {packed:,} B")


if __name__ == "__main__":
    main()
