"""FAISS inner-product indexes over unit vectors: exact by default, HNSW, IVF or PQ on request.

The index type is a FAISS factory string (``Flat``, ``HNSW32``, ``IVF1024,Flat``,
``IVF4096,PQ48``, ``SQfp16``...), the vocabulary FAISS users already know. Vectors are
L2-normalized, so inner product is cosine similarity.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np


@dataclass
class DenseIndexConfig:
    """How dense vectors are indexed and searched."""

    factory: str = "Flat"
    """FAISS index factory string; Flat is exact search."""
    hnsw_ef_search: int = 128
    """HNSW search breadth (higher: better recall, slower)."""
    ivf_nprobe: int = 16
    """IVF lists visited per query."""
    train_sample: int = 200_000
    """Vectors used to train IVF/PQ indexes (ignored by Flat and HNSW)."""
    use_gpu: bool = False
    """Move the index to the GPUs when faiss-gpu is installed (a clear error otherwise)."""


def build_dense_index(
    vectors: np.ndarray, config: DenseIndexConfig, add_batch: int = 65_536
) -> faiss.Index:
    """Build an index over ``vectors`` [num_units, dim] (float32 or float16, memmap is fine).

    Vectors are added in batches so that a memory-mapped matrix is never copied whole.
    """
    num_units, dim = vectors.shape
    index = faiss.index_factory(dim, config.factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        rng = np.random.default_rng(0)
        take = min(num_units, config.train_sample)
        rows = np.sort(rng.choice(num_units, size=take, replace=False))
        index.train(np.ascontiguousarray(vectors[rows], dtype=np.float32))
    for start in range(0, num_units, add_batch):
        index.add(np.ascontiguousarray(vectors[start : start + add_batch], dtype=np.float32))
    return index


def configure_search(index: faiss.Index, config: DenseIndexConfig) -> faiss.Index:
    """Apply search-time parameters, and move the index to the GPUs if asked."""
    parameters = faiss.ParameterSpace()
    names = faiss.downcast_index(index).__class__.__name__
    if "HNSW" in names or "HNSW" in config.factory:
        parameters.set_index_parameter(index, "efSearch", config.hnsw_ef_search)
    if "IVF" in config.factory:
        parameters.set_index_parameter(index, "nprobe", config.ivf_nprobe)
    if config.use_gpu:
        if not hasattr(faiss, "index_cpu_to_all_gpus") or faiss.get_num_gpus() == 0:
            raise RuntimeError(
                "dense.use_gpu=true but faiss has no GPU support here "
                "(install faiss-gpu and run on a CUDA machine, or set dense.use_gpu=false)"
            )
        index = faiss.index_cpu_to_all_gpus(index)
    return index


def save_dense_index(index: faiss.Index, path: Path) -> None:
    faiss.write_index(index, str(path))


def load_dense_index(path: Path) -> faiss.Index:
    return faiss.read_index(str(path))


def flat_vectors(index: faiss.Index) -> np.ndarray | None:
    """A zero-copy [ntotal, d] view of an exact index's vectors, or None for other kinds."""
    flat = faiss.downcast_index(index)
    if not isinstance(flat, faiss.IndexFlat):
        return None
    return faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * flat.d).reshape(flat.ntotal, flat.d)
