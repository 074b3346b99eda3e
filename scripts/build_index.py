"""Build the pooled sentence and paragraph indexes of one dataset split.

    python scripts/build_index.py dataset=hotpotqa split=dev
    python scripts/build_index.py dataset=musique index=minilm_hnsw index_dir=indexes/musique-hnsw

An unchanged build is reused, an interrupted one resumes; the folder is indexes/<dataset>-<split>
unless index_dir= says otherwise. A few of the split's questions are searched at the end.
"""

from __future__ import annotations

import os

from grasp.startup import log_gpu_memory, one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig

from grasp.config import (
    BuildIndexConfig,
    dataset_path,
    default_index_dir,
    register_configs,
    to_dataclass,
)
from grasp.corpus import CorpusIndex, build_index
from grasp.data import load_questions
from grasp.threads import set_threads
from grasp.types import Retriever

log = logging.getLogger("build_index")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="build_index")
@one_line_errors
def main(cfg: DictConfig) -> None:
    log_gpu_memory()  # after the imports: shows what another framework took in them
    config = to_dataclass(cfg, BuildIndexConfig)
    set_threads(config.threads)
    name = config.dataset.name
    path = dataset_path(config.dataset, config.split)
    questions = load_questions(name, config.dataset.source, path=path, split=config.split)
    directory = (
        Path(config.index_dir) if config.index_dir else default_index_dir(name, config.split)
    )
    log.info(
        "%d %s %s questions from %s -> %s", len(questions), name, config.split, path, directory
    )
    source = {"dataset": str(name), "split": config.split, "path": str(path)}
    manifest = build_index(questions, config.index, directory, source=source)
    counts = manifest.corpus
    log.info(
        "index ready: %d sentences in %d paragraphs (%s); build stages (s): %s",
        counts["num_sentences"],
        counts["num_paragraphs"],
        directory,
        {k: round(v, 1) for k, v in manifest.timings.items()},
    )
    if config.demo_queries <= 0:
        return
    index = CorpusIndex.load(directory, config.index)
    sample = questions[: config.demo_queries]
    for retriever in (Retriever.DENSE, Retriever.BM25):
        hits = index.search([q.question for q in sample], retriever, k=3)
        for question, question_hits in zip(sample, hits, strict=True):
            print(f"\n[{retriever}] {question.question}  (gold: {question.answers[0]})")
            for hit in question_hits:
                print(
                    f"  {hit.score:7.3f}  s{hit.sentence_id} p{hit.paragraph_id} "
                    f"[{hit.title}] {hit.text[:100]}"
                )


if __name__ == "__main__":
    main()
