"""grasp.corpus.dense: the vectors of an exact index outlive the index object they were read
from (as after the CPU index is copied to a GPU and dropped), and a GPU index goes on this
process's own GPU."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from grasp.corpus.dense import DenseIndexConfig, build_dense_index, flat_vectors, own_gpu


def unit_vectors(rows: int, dim: int) -> np.ndarray:
    vectors = np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_flat_vectors_keep_the_index_alive_after_the_caller_drops_it() -> None:
    expected = unit_vectors(4096, 64)  # 1 MiB: freed memory of that size is returned to the OS
    index = build_dense_index(expected, DenseIndexConfig(factory="Flat"))
    owner = weakref.ref(index)
    vectors = flat_vectors(index)
    del index
    gc.collect()
    assert owner() is not None, "the view does not hold the index: it would read freed memory"
    assert vectors.shape == (4096, 64) and vectors.dtype == np.float32
    np.testing.assert_array_equal(vectors, expected)
    # Slices of the view hold it too.
    head = vectors[:2]
    del vectors
    gc.collect()
    assert owner() is not None
    np.testing.assert_array_equal(head, expected[:2])


def test_flat_vectors_is_none_for_an_approximate_index() -> None:
    index = build_dense_index(unit_vectors(300, 16), DenseIndexConfig(factory="HNSW8"))
    assert flat_vectors(index) is None


@pytest.mark.parametrize(
    ("environ", "num_gpus", "expected"),
    [({}, 1, 0), ({"LOCAL_RANK": "0"}, 4, 0), ({"LOCAL_RANK": "3"}, 4, 3)],
)
def test_own_gpu_is_the_process_local_rank(environ: dict, num_gpus: int, expected: int) -> None:
    assert own_gpu(num_gpus, environ) == expected


def test_own_gpu_refuses_a_rank_without_its_gpu() -> None:
    with pytest.raises(RuntimeError, match=r"LOCAL_RANK='2' names no GPU of the 2"):
        own_gpu(2, {"LOCAL_RANK": "2"})
