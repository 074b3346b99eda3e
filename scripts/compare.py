"""Compare two evaluations question by question: A minus B, with paired-bootstrap intervals.

    python scripts/compare.py a=results/baselines/hf/cpu_grasp \
        b=results/baselines/hf/cpu_grasp_warm_start
    python scripts/compare.py a=runs/eval-a b=runs/eval-b 'datasets=[hotpotqa]' out=/tmp/ab.json
    python scripts/compare.py a=<run>/dev_curve/step_000050 b=<run>/dev_curve/step_000000 \
        'metrics=[all]'
    # at matched context: single-step hybrid at the depth k whose context is A's or just above
    python scripts/compare.py a=results/baselines/hf/cpu_grasp_v2 b=single_step_hybrid \
        matched_sweep=results/baselines/k_sweep_hybrid 'metrics=[recall,answer_in_evidence]'

A and B are output folders of scripts/evaluate.py (one <dataset>/trajectories.jsonl each).
For each dataset both hold (or ``datasets``) and pooled over them, prints EM, F1 and
trajectory recall (or ``metrics``: answer containment, read recall, reads that ran, the
reward and each term; ``[all]`` for every one) of A minus B on the questions both evaluated, with the 95% interval of
the mean difference (resampling questions), each side's mean and the number of questions.
An evaluation still running is read as it is, not changed. With ``matched_sweep`` (a k sweep's
folder, scripts/k_sweep.py), B is that sweep's row ``b`` at the depth whose context tokens per
episode are the least at or above A's: a comparison at matched context, where one at equal
settings favours whoever reads more. The logic is in grasp/eval/paired.py; the baseline table
shows the same for its ``paired`` rows and its ``matched_context`` section.
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

from grasp.config import PairedConfig, register_configs, to_dataclass
from grasp.eval.context import token_counter
from grasp.eval.paired import compare_at_matched_context, compare_folders

register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="compare")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, PairedConfig)
    if config.matched_sweep is not None:
        comparison = compare_at_matched_context(
            Path(config.a),
            Path(config.matched_sweep),
            config.b,
            token_counter(config.model),
            config.datasets,
            config.compared_metrics(),
        )
    else:
        comparison = compare_folders(
            Path(config.a), Path(config.b), config.datasets, config.compared_metrics()
        )
    print(comparison.markdown(), end="")
    if config.out is not None:
        Path(config.out).parent.mkdir(parents=True, exist_ok=True)
        Path(config.out).write_text(json.dumps(comparison.as_json(), indent=2))


if __name__ == "__main__":
    main()
