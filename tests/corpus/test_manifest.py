"""Index integrity: the ``index.verify`` setting, and the manifest checked against its schema."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import pytest
from hydra import compose, initialize_config_dir

from grasp.config import EvalRetrievalConfig, EvaluateConfig, register_configs, to_dataclass
from grasp.corpus import (
    CorpusIndex,
    IndexConfig,
    IndexCorruptError,
    IndexMismatchError,
    Manifest,
    build_index,
)
from grasp.corpus.build import DENSE_FILE, VerifyMode
from grasp.corpus.manifest import FORMAT_VERSION, MANIFEST_FILE, ManifestError
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


# ---------------------------------------------------------------------- manifest schema


def edit_manifest(directory: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = directory / MANIFEST_FILE
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def files_as_a_list(data: dict[str, Any]) -> None:
    data["files"] = [{"path": p, **entry} for p, entry in data["files"].items()]


def without_granularities(data: dict[str, Any]) -> None:
    del data["config"]["granularities"]


def bytes_as_a_string(data: dict[str, Any]) -> None:
    entry = data["files"]["sentence/dense.faiss"]
    entry["bytes"] = str(entry["bytes"])


def another_dimension(data: dict[str, Any]) -> None:
    data["dimension"] = 768


def without_the_dense_entry(data: dict[str, Any]) -> None:
    del data["files"]["sentence/dense.faiss"]


FIVE_CASES = [
    (files_as_a_list, r"field files must be a mapping of relative path -> \{bytes, sha256\}"),
    (without_granularities, r"field config\.granularities is missing"),
    (
        bytes_as_a_string,
        r"field files\['sentence/dense\.faiss'\]\.bytes must be an integer, found string '\d+'",
    ),
    (
        another_dimension,
        r"field dimension is 768 but \S+sentence/dense\.faiss holds 384-d vectors",
    ),
    (
        without_the_dense_entry,
        r"files has no entry for sentence/dense\.faiss, which the index reads",
    ),
]


@pytest.mark.parametrize(("edit", "message"), FIVE_CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_an_edited_manifest_is_refused_naming_the_field(index_copy, edit, message):
    edit_manifest(index_copy, edit)
    with pytest.raises(ManifestError, match=rf"manifest\.json.*{message}"):
        CorpusIndex.load(index_copy, IndexConfig())
    with pytest.raises(ManifestError, match=message):
        CorpusIndex.load(index_copy)  # as the service loads it, without a config


def test_a_file_without_an_entry_is_not_read_unchecked(index_copy):
    """The issue's case: the entry removed, then a vector zeroed (same size)."""
    edit_manifest(index_copy, without_the_dense_entry)
    path = index_copy / "sentence" / DENSE_FILE
    index = faiss.read_index(str(path))
    faiss.rev_swig_ptr(index.get_xb(), index.d)[:] = 0
    faiss.write_index(index, str(path))
    with pytest.raises(ManifestError, match=r"no entry for sentence/dense\.faiss"):
        CorpusIndex.load(index_copy, IndexConfig(verify="size"))


@pytest.mark.parametrize(
    ("edit", "message"), FIVE_CASES[:3], ids=["list", "granularities", "bytes"]
)
def test_a_build_over_an_edited_manifest_rebuilds_the_index(
    tiny_questions, index_copy, edit, message
):
    """What evaluate and training do (build_index, then load): a rebuild, not a crash."""
    edit_manifest(index_copy, edit)
    build_index(tiny_questions, IndexConfig(), index_copy)
    index = CorpusIndex.load(index_copy, IndexConfig())
    assert index.search(["Warsaw"], Retriever.BM25, k=1)[0][0].title == "Warsaw"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(build_key=7), r"field build_key must be str, found int 7"),
        (lambda d: d.update(extra=1), r"field extra is not a manifest field"),
        (lambda d: d.pop("corpus"), r"field corpus is missing"),
        (lambda d: d["config"].update(granularities=[]), r"config\.granularities must be a non"),
        (lambda d: d["config"].update(granularities=["word"]), r"config\.granularities must"),
        (lambda d: d["config"].update(bm25=None), r"field config\.bm25 must be a mapping, found"),
        (lambda d: d["config"].update(prepend_title="yes"), r"config\.prepend_title must be bool"),
        (lambda d: d["corpus"].update(num_sentences="18"), r"corpus\.num_sentences must be an int"),
        (lambda d: d["corpus"].update(num_paragraphs=-1), r"num_paragraphs must be at least 0"),
        (lambda d: d.update(dimension=True), r"field dimension must be an integer, found boolean"),
        (lambda d: d.update(dimension=0), r"field dimension must be at least 1, found 0"),
        (lambda d: d["files"].update({"x": 3}), r"field files\['x'\] must be a mapping"),
        (
            lambda d: d["files"]["corpus/questions.parquet"].update(sha256="ABC"),
            r"files\['corpus/questions\.parquet'\]\.sha256 must be 64 lower-case hex digits",
        ),
        (lambda d: d["files"]["corpus/questions.parquet"].pop("bytes"), r"\.bytes is missing"),
        (lambda d: d.update(timings={"total": "1s"}), r"timings\['total'\] must be int or float"),
        (lambda d: d.update(versions=[]), r"field versions must be a mapping, found list"),
        (lambda d: d["config"]["bm25"].update(k3=1.0), r"config\.bm25\.k3 is not an index setting"),
    ],
)
def test_every_manifest_field_is_type_checked(index_copy, edit, message):
    edit_manifest(index_copy, edit)
    with pytest.raises(ManifestError, match=message):
        CorpusIndex.load(index_copy)


def test_a_manifest_that_is_not_an_object_is_named(index_copy):
    (index_copy / MANIFEST_FILE).write_text("[1, 2]")
    with pytest.raises(ManifestError, match=r"manifest\.json.*expected a JSON object, found list"):
        CorpusIndex.load(index_copy)


def test_another_format_version_says_rebuild(index_copy):
    edit_manifest(index_copy, lambda d: d.update(format_version=FORMAT_VERSION + 1))
    with pytest.raises(IndexMismatchError, match=r"index format 2, this code reads 1"):
        CorpusIndex.load(index_copy)


def test_a_manifest_made_in_memory_is_checked_too(tiny_index_dir):
    """The retrieval client builds one from the service's /info reply."""
    data = json.loads((tiny_index_dir / MANIFEST_FILE).read_text())
    files_as_a_list(data)
    with pytest.raises(ManifestError, match=r"field files must be a mapping"):
        Manifest(**data)


def test_manifest_errors_are_index_corrupt_errors():
    """build_index rebuilds, and the scripts report, whatever is an IndexCorruptError."""
    assert issubclass(ManifestError, IndexCorruptError)
