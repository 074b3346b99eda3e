"""Measure hybrid-fusion variants: single-step recall@k per dev set and granularity, with CIs.

    python scripts/eval_fusion.py n=1000 out=results/fusion/fusion.json

Takes eval_retrieval's configuration (datasets, split, k, n, seed, index, index_root); the
index is built or reused as there. For each dataset and granularity, every sampled question
is searched once with its own text by dense, by BM25 and by each hybrid variant of
``VARIANTS``, all through ``CorpusIndex.search`` (the code path of every caller). Recorded per
cell: recall@k with its 95% percentile-bootstrap interval over questions
(``grasp.metrics.bootstrap_ci``), and for each variant the paired interval of its
per-question difference from dense alone and from the previous default (RRF, depth 50).
Writes ``out`` (JSON) and the same with ``.md`` (the tables).

The rule for the default, fixed before measuring: the variant with the highest mean recall
over all dataset x granularity cells, among those whose paired interval against dense
alone lies entirely below zero in no cell (hybrid must not be worse than dense anywhere).
The measurement lives in ``grasp/bench/fusion.py``.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import logging
import sys

import hydra
from omegaconf import DictConfig

from grasp.bench.fusion import markdown, run_fusion, write_fusion_report
from grasp.config import EvalRetrievalConfig, register_configs, to_dataclass

log = logging.getLogger("eval_fusion")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="eval_retrieval")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, EvalRetrievalConfig)
    report = run_fusion(config, " ".join(["python", "scripts/eval_fusion.py", *sys.argv[1:]]))
    out = write_fusion_report(report, config.out)
    print(markdown(report))
    log.info("wrote %s and %s", out, out.with_suffix(".md"))


if __name__ == "__main__":
    main()
