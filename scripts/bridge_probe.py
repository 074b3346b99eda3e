"""Probe the next hop's candidate queries without a model, on a split's questions.

    python scripts/bridge_probe.py                                   # HotpotQA train, top-5
    python scripts/bridge_probe.py out=results/cpu_grasp_v2/bridge_probe.json
    python scripts/bridge_probe.py dataset=musique split=dev n=200

Plays the warm start's first steps with no model (a semantic and a keyword search on the
question, read the first hit's paragraph) and, on the questions still lacking a gold
paragraph, counts how often each candidate query of the next hop finds one: the warm start's
bridge query, the bridge entity the read paragraph names, and controls. Prints a table and
writes JSON. The probe lives in ``grasp/experiments/bridge_probe.py``.
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

from grasp.bench.report import publish
from grasp.config import BridgeProbeConfig, register_configs, to_dataclass
from grasp.experiments.bridge_probe import run_probe, table

log = logging.getLogger("bridge_probe")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="bridge_probe")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BridgeProbeConfig)
    report = run_probe(config)
    publish(report, config.out, "bridge_probe.json", table(report), log)


if __name__ == "__main__":
    main()
