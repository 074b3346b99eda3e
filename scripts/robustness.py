"""The robustness suite: a policy on clean and adversarial corpora of the same dev questions.

    python scripts/robustness.py policy=scripted                      # 20 HotpotQA dev questions
    python scripts/robustness.py policy=hf n=3 out=runs/robustness/smoke
    python scripts/robustness.py run_dir=results/cpu_grasp_v2 out=runs/robustness/cpu_grasp_v2
    python scripts/robustness.py dataset=musique poisoning.copies=16 out=runs/robustness/musique

A seed-42 sample of n dev questions; their pooled paragraphs are the clean corpus. The attacks
are built from those questions at run time by seeded functions (grasp/experiments/adversarial.py):
injected instructions that name each question's entity, near-identical copies of a paragraph
claiming a wrong answer (searched without and with near-duplicate detection at index build),
and the questions with their evidence removed (ended by the turn, token and wall-clock budgets).
Each run is evaluated into out/<run>/ over its own index under indexes/robustness/; then
out/robustness.json and out/robustness.md: attack success rates, clean-vs-attacked EM/F1/recall,
the copies' share of the top-K slots and the answer flips, and how every exhausted episode ended.
The work is ``grasp.experiments.robustness``.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from grasp.config import RobustnessConfig, register_configs, to_dataclass
from grasp.experiments.robustness import run_robustness, trained_policy
from grasp.threads import set_threads
from grasp.train.resume import check_training_run

register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="robustness")
@one_line_errors
def main(cfg: DictConfig) -> None:
    """Compose the config, then run the suite (``grasp.experiments.robustness.run_robustness``)."""
    config = to_dataclass(cfg, RobustnessConfig)
    if config.run_dir is not None:  # a trained policy, in the environment it was trained in
        check_training_run(Path(config.run_dir))  # an evaluation's folder is named as one
        config = trained_policy(config, HydraConfig.get().overrides.task)
    set_threads(config.threads)
    run_robustness(config)


if __name__ == "__main__":
    main()
