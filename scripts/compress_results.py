"""Store every finished evaluation's trajectories.jsonl under a folder as trajectories.jsonl.xz.

    python scripts/compress_results.py                 # results/, before committing results
    python scripts/compress_results.py root=runs/eval  # any other folder

Finished means a results.json beside the file. Trajectories compress about 10x, and every
reader (evaluation, resume, tables, comparisons, the report) reads both forms
(grasp/compressed.py); tests/test_repository_size.py fails CI when a plain one is committed
under results/. A file it must not store is named on a line of its own and left as it was,
and the others are stored all the same (the exit status is then 1): a folder an evaluation is
writing, one that holds both forms already (which holds every record is for a person to say),
a plain file that cannot be removed.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from grasp.compressed import compress
from grasp.config import CompressConfig, register_configs, to_dataclass
from grasp.eval.results import RESULTS_FILE
from grasp.eval.resume import locked
from grasp.rollout.trajectory import TRAJECTORIES_FILE

register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="compress_results")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, CompressConfig)
    root = Path(config.root)
    if not root.is_dir():
        raise NotADirectoryError(f"root={config.root} is not a folder")
    # As grasp.eval.policy_eval.compress_finished, each folder under its lock, but a folder
    # that cannot be stored stops none of the others.
    finished = [
        p for p in sorted(root.rglob(TRAJECTORIES_FILE)) if (p.parent / RESULTS_FILE).is_file()
    ]
    written, plain = [], 0
    for path in finished:
        size = path.stat().st_size
        try:
            with locked(path.parent):
                written.append(compress(path))
        except (OSError, ValueError) as error:  # a folder being written is an OSError too
            print(f"not stored: {error}", file=sys.stderr)
            continue
        plain += size
    packed = sum(p.stat().st_size for p in written)
    print(f"{len(written)} trajectory files compressed: {plain:,} B -> {packed:,} B")
    if len(written) < len(finished):
        raise SystemExit(
            f"error: {len(finished) - len(written)} of {len(finished)} finished trajectory "
            "files not stored (named above)"
        )


if __name__ == "__main__":
    main()
