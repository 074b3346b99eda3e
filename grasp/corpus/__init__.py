"""The sentence corpus and its indexes: pooled paragraphs, dense (FAISS) and BM25 (bm25s) search."""

from grasp.corpus.bm25 import BM25Config, KeywordIndex
from grasp.corpus.build import IndexConfig, build_index
from grasp.corpus.corpus import SentenceCorpus
from grasp.corpus.dense import DenseIndexConfig
from grasp.corpus.encoder import DenseEncoder, EncoderConfig
from grasp.corpus.index import CorpusIndex
from grasp.corpus.manifest import (
    IndexCorruptError,
    IndexDirectoryError,
    IndexMismatchError,
    IndexMissingError,
    Manifest,
)

__all__ = [
    "BM25Config",
    "CorpusIndex",
    "DenseEncoder",
    "DenseIndexConfig",
    "EncoderConfig",
    "IndexConfig",
    "IndexCorruptError",
    "IndexDirectoryError",
    "IndexMismatchError",
    "IndexMissingError",
    "KeywordIndex",
    "Manifest",
    "SentenceCorpus",
    "build_index",
]
