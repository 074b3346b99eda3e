"""FAISS inner-product indexes over unit vectors: exact by default, HNSW, IVF or PQ on request.

The index type is a FAISS factory string (``Flat``, ``HNSW32``, ``IVF1024,Flat``,
``IVF4096,PQ48``, ``SQfp16``...), the vocabulary FAISS users already know. Vectors are
L2-normalized, so inner product is cosine similarity. The factory string is also the storage
choice: ``Flat`` keeps float32 vectors (4 bytes per dimension), ``SQfp16`` float16 (2),
``PQ48`` 48 bytes per vector whatever the dimension; ``scripts/bench_build.py`` measures what
each costs in recall against exact search.

Indexes are built from a ``VectorFile`` (the ``.npy`` matrix on disk, read a block at a time)
or from an array: a bounded sample trains the quantizers, then vectors are added a block at a
time, so only the index itself grows with the corpus.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:
    import faiss
except ImportError as error:  # neither extra installed: say which one to install
    raise ImportError(
        "faiss is not installed: pip install 'grasp[cpu]' (faiss-cpu), or on a CUDA machine "
        "pip install -c constraints-gpu.txt 'grasp[gpu]' (faiss-gpu-cu12); never both"
    ) from error

from grasp.corpus.manifest import IndexCorruptError

VECTOR_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))


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
    """Move the index to this process's GPU when faiss-gpu is installed (a clear error
    otherwise): GPU <LOCAL_RANK> under a multi-process launcher, else GPU 0."""


class VectorFile:
    """A 2-D ``.npy`` matrix on disk, read by rows with plain reads instead of a memory map.

    Reading a 10 GB matrix block by block then costs one block of memory, and the pages read
    are not counted in the process RSS as a memory map's would be. Slicing (``vectors[a:b]``)
    and sorted row arrays (``vectors[rows]``) return float32 arrays, like a NumPy matrix.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        with self.path.open("rb") as handle:
            try:
                version = np.lib.format.read_magic(handle)
                read_header = (
                    np.lib.format.read_array_header_1_0
                    if version == (1, 0)
                    else np.lib.format.read_array_header_2_0
                )
                shape, fortran_order, dtype = read_header(handle)
            except ValueError as error:
                raise IndexCorruptError(f"{self.path} is not a .npy matrix: {error}") from error
            self.offset = handle.tell()
        if len(shape) != 2 or fortran_order or dtype not in VECTOR_DTYPES:
            raise IndexCorruptError(
                f"{self.path} holds a {dtype} array of shape {shape}"
                f"{' (Fortran order)' if fortran_order else ''}; expected a C-order "
                "[units, dim] float32 or float16 matrix"
            )
        self.shape: tuple[int, int] = (int(shape[0]), int(shape[1]))
        self.dtype = dtype
        self.row_bytes = self.shape[1] * dtype.itemsize
        expected = self.offset + self.shape[0] * self.row_bytes
        actual = self.path.stat().st_size
        if actual != expected:
            raise IndexCorruptError(
                f"{self.path} has {actual} bytes; its header ({self.shape[0]} x {self.shape[1]} "
                f"{dtype}) needs {expected} (truncated or overwritten)"
            )

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: slice | np.ndarray) -> np.ndarray:
        """float32 rows: ``key`` is a slice with step 1, or an ascending array of row ids."""
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step != 1:
                raise ValueError("VectorFile slices must have step 1")
            return self._read(start, max(start, stop))
        rows = np.asarray(key, dtype=np.int64)
        out = np.empty((len(rows), self.shape[1]), dtype=np.float32)
        with self.path.open("rb") as handle:
            for i, row in enumerate(rows.tolist()):
                data = os.pread(handle.fileno(), self.row_bytes, self.offset + row * self.row_bytes)
                out[i] = np.frombuffer(data, dtype=self.dtype)
        return out

    def _read(self, start: int, stop: int) -> np.ndarray:
        with self.path.open("rb") as handle:
            handle.seek(self.offset + start * self.row_bytes)
            count = (stop - start) * self.shape[1]
            block = np.fromfile(handle, dtype=self.dtype, count=count)
        return block.reshape(stop - start, self.shape[1]).astype(np.float32, copy=False)


def build_dense_index(
    vectors: np.ndarray | VectorFile, config: DenseIndexConfig, add_batch: int = 65_536
) -> faiss.Index:
    """Build an index over ``vectors`` [num_units, dim] (float32 or float16).

    A uniform sample of at most ``config.train_sample`` vectors trains IVF and PQ quantizers;
    then vectors are added ``add_batch`` at a time, so neither a memory-mapped matrix nor a
    ``VectorFile`` is ever read whole. Raises ValueError naming ``dense.factory`` when FAISS
    cannot parse the factory string or train it on the vectors available.
    """
    num_units, dim = vectors.shape
    try:
        index = faiss.index_factory(dim, config.factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as error:
        raise ValueError(
            f"dense.factory={config.factory!r} is not a FAISS index: {error}"
        ) from error
    if isinstance(faiss.downcast_index(index), faiss.IndexPQ):
        # Polysemous training reorders each sub-quantizer's centroids so that Hamming distances
        # between codes approximate L2 ones; only a polysemous (Hamming-filtered) search uses
        # that order, which configure_search never sets. It costs about 80 s per PQ48 index
        # whatever the number of vectors, and leaves the distances of our search unchanged.
        faiss.downcast_index(index).do_polysemous_training = False
    if not index.is_trained:
        rng = np.random.default_rng(0)
        take = min(num_units, config.train_sample)
        rows = np.sort(rng.choice(num_units, size=take, replace=False))
        try:
            index.train(np.ascontiguousarray(vectors[rows], dtype=np.float32))
        except RuntimeError as error:
            raise ValueError(
                f"dense.factory={config.factory!r} could not be trained on {take} vectors "
                f"(dense.train_sample={config.train_sample}, {num_units} units): {error}"
            ) from error
    for start in range(0, num_units, add_batch):
        index.add(np.ascontiguousarray(vectors[start : start + add_batch], dtype=np.float32))
    return index


def configure_search(index: faiss.Index, config: DenseIndexConfig) -> faiss.Index:
    """Apply search-time parameters, and move the index to this process's GPU if asked.

    One GPU, not all visible ones: every training process that holds a local index would
    otherwise put a replica on every GPU of the node (``index_cpu_to_all_gpus``).
    """
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
        device = own_gpu(faiss.get_num_gpus())
        index = faiss.index_cpu_to_gpus_list(index, gpus=[device])
    return index


def own_gpu(num_gpus: int, environ: Mapping[str, str] | None = None) -> int:
    """The GPU this process's index goes on: ``LOCAL_RANK`` under a launcher, else 0."""
    environ = os.environ if environ is None else environ
    rank = environ.get("LOCAL_RANK", "0")
    if not rank.isdigit() or int(rank) >= num_gpus:
        raise RuntimeError(
            f"dense.use_gpu=true: LOCAL_RANK={rank!r} names no GPU of the {num_gpus} faiss sees"
        )
    return int(rank)


def save_dense_index(index: faiss.Index, path: Path) -> None:
    """Write ``index`` to ``path`` atomically (a crash leaves the old file or none)."""
    tmp = path.with_name(path.name + ".tmp")
    faiss.write_index(index, str(tmp))
    os.replace(tmp, path)


def load_dense_index(path: Path) -> faiss.Index:
    return faiss.read_index(str(path))


class _OwnedBuffer:
    """An array interface over memory owned by a FAISS index, holding the index alive.

    ``rev_swig_ptr`` gives a NumPy view that does not keep its owner: once the CPU index is
    freed (as after its copy to a GPU), the view reads freed memory. An array built from this
    object has it as its ``base``, so the index lives as long as any view of its vectors.
    """

    def __init__(self, view: np.ndarray, owner: faiss.Index) -> None:
        self.__array_interface__ = view.__array_interface__
        self.owner = owner


def flat_vectors(index: faiss.Index) -> np.ndarray | None:
    """A zero-copy [ntotal, d] view of an exact index's vectors, or None for other kinds.

    The view keeps ``index`` alive, so it stays valid after the caller drops the index.
    """
    flat = faiss.downcast_index(index)
    if not isinstance(flat, faiss.IndexFlat):
        return None
    view = faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * flat.d).reshape(flat.ntotal, flat.d)
    return np.asarray(_OwnedBuffer(view, index))
