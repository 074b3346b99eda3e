"""Write a normalized, seeded sample of a dataset split (the paper protocol: 500, seed 42).

    python scripts/prepare_data.py dataset=hotpotqa split=dev out=runs/hotpotqa-dev-500.jsonl
    python scripts/prepare_data.py dataset=musique dataset.source=raw \
        dataset.path=musique_ans_v1.0_dev.jsonl n=500 seed=42 out=data/musique/dev-500.jsonl

Reads any source (normalized JSONL, an official raw file, or the hub when online) and writes
our JSONL schema, so every later step reads one format.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import logging

import hydra
from omegaconf import DictConfig

from grasp.config import PrepareDataConfig, register_configs, to_dataclass
from grasp.data import load_questions, sample_questions, write_normalized

log = logging.getLogger("prepare_data")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="prepare_data")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, PrepareDataConfig)
    dataset = config.dataset
    questions = load_questions(dataset.name, dataset.source, path=dataset.path, split=config.split)
    sample = sample_questions(questions, config.n, seed=config.seed)
    path = write_normalized(sample, config.out)
    log.info(
        "%d of %d %s %s questions (seed %d) -> %s",
        len(sample),
        len(questions),
        dataset.name,
        config.split,
        config.seed,
        path,
    )


if __name__ == "__main__":
    main()
