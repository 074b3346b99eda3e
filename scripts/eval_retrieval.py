"""Single-step retrieval recall on each bundled dev set: the reference table for every policy.

    python scripts/eval_retrieval.py out=runs/eval_retrieval.json
    python scripts/eval_retrieval.py 'datasets=[hotpotqa]' k=5 n=500

Each dataset is searched in its own pooled index (built, or reused, under indexes/). Writes
JSON shaped {"k", "n", "seed", "split", "fusion": {index.fusion settings}, "results":
{dataset: {granularity: {retriever: {"recall", "all_gold", "recall_ci", "n"}}}}} and prints
it as a table, headed by the hybrid fusion it used (``index.fusion.*``, e.g.
``index.fusion.depth=5``; see grasp/corpus/fusion.py).
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import dataclasses
import json
import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig

from grasp.config import (
    REPO_ROOT,
    DatasetConfig,
    EvalRetrievalConfig,
    dataset_path,
    default_index_dir,
    register_configs,
    to_dataclass,
)
from grasp.corpus import CorpusIndex, build_index
from grasp.data import load_questions, sample_questions
from grasp.eval.single_step import single_step_recall
from grasp.threads import set_threads
from grasp.types import Granularity, Retriever

log = logging.getLogger("eval_retrieval")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="eval_retrieval")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, EvalRetrievalConfig)
    set_threads(config.threads)
    results: dict[str, dict[str, dict[str, dict[str, object]]]] = {}
    for name in config.datasets:
        path = dataset_path(DatasetConfig(name=name), config.split)
        questions = load_questions(name, "normalized", path=path, split=config.split)
        directory = default_index_dir(name, config.split, config.index_root)
        source = {"dataset": str(name), "split": config.split, "path": str(path)}
        build_index(questions, config.index, directory, source=source)
        index = CorpusIndex.load(directory, config.index)
        sample = sample_questions(questions, config.n, seed=config.seed)
        log.info(
            "%s: %d of %d questions, k=%d, hybrid %s",
            name, len(sample), len(questions), config.k, config.index.fusion.describe(),
        )  # fmt: skip
        per_granularity = results.setdefault(str(name), {})
        for granularity in index.granularities:
            row = per_granularity.setdefault(str(granularity), {})
            for retriever in (Retriever.BM25, Retriever.DENSE, Retriever.HYBRID):
                result = single_step_recall(index, sample, retriever, granularity, k=config.k)
                row[str(retriever)] = result.as_dict()
    out = Path(config.out) if config.out else REPO_ROOT / "runs" / "eval_retrieval.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "k": config.k,
        "n": config.n,
        "seed": config.seed,
        "split": config.split,
        "fusion": dataclasses.asdict(config.index.fusion),
        "results": results,
    }
    out.write_text(json.dumps(report, indent=2))
    print(f"hybrid: {config.index.fusion.describe()}")
    print(format_table(results, config.k))
    log.info("wrote %s", out)


def format_table(results: dict, k: int) -> str:
    """Markdown table: one row per dataset and granularity, recall / all-gold per retriever."""
    retrievers = [str(r) for r in (Retriever.BM25, Retriever.DENSE, Retriever.HYBRID)]
    header = (
        "| dataset | granularity | " + " | ".join(f"{r} R@{k} / all" for r in retrievers) + " |"
    )
    lines = [header, "|" + "---|" * (2 + len(retrievers))]
    for dataset, per_granularity in results.items():
        for granularity in (str(g) for g in Granularity):
            if granularity not in per_granularity:
                continue
            cells = [
                f"{per_granularity[granularity][r]['recall']:.3f} / "
                f"{per_granularity[granularity][r]['all_gold']:.3f}"
                for r in retrievers
            ]
            lines.append(f"| {dataset} | {granularity} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
