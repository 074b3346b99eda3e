"""Index integrity: the ``index.verify`` setting, and what loading checks of the files."""

from __future__ import annotations

import shutil
from pathlib import Path

import faiss
import pytest
from hydra import compose, initialize_config_dir

from grasp.config import EvalRetrievalConfig, EvaluateConfig, register_configs, to_dataclass
from grasp.corpus import CorpusIndex, IndexConfig, IndexCorruptError, build_index
from grasp.corpus.build import DENSE_FILE, VerifyMode
from grasp.paths import REPO_ROOT
from grasp.types import Retriever

register_configs()


@pytest.fixture
def index_copy(tiny_index_dir, tmp_path) -> Path:
    target = tmp_path / "index"
    shutil.copytree(tiny_index_dir, target)
    return target


def negate_vectors(path: Path) -> None:
    """Overwrite an exact FAISS index with its vectors negated: same size, wrong answers."""
    index = faiss.read_index(str(path))
    vectors = faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d)
    vectors *= -1
    size = path.stat().st_size
    faiss.write_index(index, str(path))
    assert path.stat().st_size == size


# ---------------------------------------------------------------------- index.verify


@pytest.mark.parametrize(("script", "schema"), [("eval_retrieval", EvalRetrievalConfig)])
@pytest.mark.parametrize("value", ["checksums", "Checksum", "none", ""])
def test_an_unknown_verify_value_is_refused_at_config_load(script, schema, value):
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        cfg = compose(script, overrides=[f"index.verify={value}"])
    with pytest.raises(ValueError, match=rf"index\.verify='{value}' is not one of: checksum, size"):
        to_dataclass(cfg, schema)


def test_evaluate_refuses_an_unknown_verify_value_too():
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        cfg = compose("evaluate", overrides=["index.verify=checksums"])
    with pytest.raises(ValueError, match=r"index\.verify='checksums'"):
        to_dataclass(cfg, EvaluateConfig)


@pytest.mark.parametrize("value", ["checksum", "size"])
def test_known_verify_values_load_as_the_enum(value):
    assert IndexConfig(verify=value).verify is VerifyMode(value)


def test_verify_reassigned_to_an_unknown_value_is_refused_on_use(index_copy):
    config = IndexConfig()
    config.verify = "checksums"
    with pytest.raises(ValueError, match=r"index\.verify='checksums'"):
        CorpusIndex.load(index_copy, config)


def test_same_size_corruption_of_dense_faiss_is_caught_by_default(index_copy):
    negate_vectors(index_copy / "sentence" / DENSE_FILE)
    with pytest.raises(
        IndexCorruptError, match=r"sentence/dense\.faiss does not match its checksum"
    ):
        CorpusIndex.load(index_copy, IndexConfig())
    # What size checks alone let through: the index loads, and dense search ranks backwards.
    blind = CorpusIndex.load(index_copy, IndexConfig(verify="size"))
    (hits,) = blind.search(["Who discovered polonium?"], Retriever.DENSE, k=1)
    assert hits[0].title != "Marie Curie"


def test_a_build_over_a_same_size_corruption_rebuilds_it_by_default(tiny_questions, index_copy):
    negate_vectors(index_copy / "sentence" / DENSE_FILE)
    build_index(tiny_questions, IndexConfig(), index_copy)
    index = CorpusIndex.load(index_copy, IndexConfig())  # its checksums hold again
    (hits,) = index.search(["Who discovered polonium?"], Retriever.DENSE, k=1)
    assert hits[0].title == "Marie Curie"
