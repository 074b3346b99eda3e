"""Train the GRASP policy with GRPO (TRL), evaluating before and after.

    python scripts/train.py                                  # experiment=cpu_smoke, < 10 min on CPU
    python scripts/train.py experiment=cpu_learn             # a few hundred CPU steps
    python scripts/train.py experiment=cpu_smoke ablation=no_read run_dir=runs/smoke-no-read
    accelerate launch --config_file configs/accelerate/zero2.yaml scripts/train.py \
        experiment=grasp_qwen2.5_3b

The run directory (run_dir=, default runs/<experiment>) receives config.json, metrics.jsonl,
trajectories/, checkpoints/, eval_before/, eval_after/, results.json and curves.png.
Running the same command again resumes from the last checkpoint; once the run is finished
(results.json at grpo.max_steps, with final/), it says so and does nothing. One process at a
time trains a folder (grasp/train/resume.py).
"""

from __future__ import annotations

import os

from grasp.startup import log_gpu_memory, one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import json
import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from grasp.config import register_configs, to_dataclass
from grasp.threads import set_threads
from grasp.train.config import TrainConfig
from grasp.train.process import run_process, set_process_environment
from grasp.train.trainer import run_training

log = logging.getLogger("train")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="train")
@one_line_errors
def main(cfg: DictConfig) -> None:
    log_gpu_memory()  # after the imports: shows what another framework took in them
    config = to_dataclass(cfg, TrainConfig)
    set_threads(config.threads)
    set_process_environment(config.wandb, Path(config.run_dir))
    process = run_process(cpu=config.model.device == "cpu")  # one of a launch's processes
    resolved = OmegaConf.to_container(cfg, resolve=True)
    results = run_training(config, resolved, process)
    after = results.after.results
    summary = {
        "em": after.em,
        "f1": after.f1,
        "recall": after.recall,
        "parse_error_rate": after.parse_error_rate,
    }
    log.info("after training: %s", json.dumps(summary))
    if results.delta is not None:
        log.info("change from before: %s", json.dumps(results.delta))
    log.info("run directory: %s", config.run_dir)


if __name__ == "__main__":
    main()
