"""What policies did, read from their evaluations' trajectories.

    python scripts/behaviour.py 'folders=[results/baselines/hf/cpu_grasp_v2]'
    python scripts/behaviour.py 'folders=[results/baselines/hf/cpu_grasp_v3,results/baselines/hf/cpu_grasp_v2]' \
        out=results/cpu_grasp_v3/behaviour.json

For each evaluation output folder (scripts/evaluate.py out=, a <dataset>/trajectories.jsonl
each), pooled over its datasets: searches per episode, the episodes that hop (a search whose
query is not a near-copy of the question) and the hops that found a gold paragraph no earlier
search had, reads and how many read hit [1], where the answers come from (a title the tools
showed, their text, the question), answer in evidence, and how questions with a double quote
fare against the others (answered, parse errors per turn); then the first hop queries. Prints
markdown; out= writes the JSON with every hop query. The logic is in grasp/eval/behaviour.py.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import json
from pathlib import Path

import hydra
from omegaconf import DictConfig

from grasp.config import BehaviourConfig, register_configs, to_dataclass
from grasp.eval.behaviour import behaviour, markdown
from grasp.eval.context import has_trajectories, read_trajectories

register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="behaviour")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BehaviourConfig)
    report = {}
    for name in config.folders:
        folder = Path(name)
        datasets = config.datasets or sorted(
            p.name for p in folder.glob("*") if p.is_dir() and has_trajectories(p)
        )
        if not datasets:
            raise ValueError(f"{folder}: no dataset's trajectories")
        found = behaviour([t for d in datasets for t in read_trajectories(folder / d)])
        report[name] = {"datasets": datasets, **found.to_json()}
        print(markdown(name, found, config.examples))
    if config.out is not None:
        Path(config.out).parent.mkdir(parents=True, exist_ok=True)
        Path(config.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
