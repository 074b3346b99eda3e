"""Serve an index directory's search over HTTP: the retrieval service of grasp.

    python scripts/serve_retrieval.py index_dir=indexes/hotpotqa-dev
    python scripts/serve_retrieval.py index_dir=indexes/hotpotqa-train index=e5_gpu host=0.0.0.0

Loads the index once (encoder warmed up), then answers ``POST /search`` (batched dense, BM25
or hybrid search, optional per-query scopes), ``POST /paragraphs`` (what read_paragraph
shows), ``GET /health`` and ``GET /info``; concurrent searches are merged into one encoder
pass. Point training or evaluation at it with ``index.remote_url=http://HOST:PORT`` (and the
same ``index=`` config). Stop it with Ctrl-C.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import logging
from pathlib import Path

import hydra
import uvicorn
from omegaconf import DictConfig

from grasp.config import ServeRetrievalConfig, register_configs, to_dataclass
from grasp.corpus import CorpusIndex
from grasp.serve.app import create_app
from grasp.threads import set_threads

log = logging.getLogger("serve_retrieval")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="serve_retrieval")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, ServeRetrievalConfig)
    set_threads(config.threads)
    directory = Path(config.index_dir)
    log.info("loading %s", directory)
    index = CorpusIndex.load(directory, config.index).warm_up()
    counts = index.manifest.corpus
    log.info(
        "serving %s (%d sentences, %d paragraphs, encoder %s on %s) at http://%s:%d",
        directory,
        counts["num_sentences"],
        counts["num_paragraphs"],
        config.index.encoder.model,
        config.index.encoder.device,
        config.host,
        config.port,
    )
    app = create_app(index, config.service)
    uvicorn.run(
        app,
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        timeout_keep_alive=config.keep_alive_s,
    )


if __name__ == "__main__":
    main()
