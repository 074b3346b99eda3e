"""Tests of grasp.data.load_questions: dispatch over sources, default paths and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from grasp.data import (
    REPO_ROOT,
    DataFormatError,
    DataSource,
    default_normalized_path,
    load_questions,
    write_normalized,
)
from grasp.types import DatasetName

RAW = Path(__file__).resolve().parents[1] / "fixtures" / "raw"


def test_data_source_values() -> None:
    assert [s.value for s in DataSource] == ["normalized", "raw", "hub"]


def test_repo_root_holds_the_bundled_files() -> None:
    assert default_normalized_path("hotpotqa") == REPO_ROOT / "data" / "hotpotqa" / "dev.jsonl"
    assert all(default_normalized_path(d).is_file() for d in DatasetName)


def test_default_normalized_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # the default path must not depend on the working directory
    questions = load_questions(DatasetName.TWOWIKI)
    assert len(questions) == 960
    assert questions[0].question_id == "0016373a0bda11eba7f7acde48001122"


def test_relative_path_is_tried_from_the_repo_root(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    questions = load_questions("musique", "normalized", path="data/musique/dev.jsonl")
    assert len(questions) == 331


def test_relative_path_from_the_working_directory_wins(monkeypatch, tmp_path: Path) -> None:
    few = load_questions("hotpotqa")[:3]
    write_normalized(few, tmp_path / "data" / "hotpotqa" / "dev.jsonl")
    monkeypatch.chdir(tmp_path)
    assert load_questions("hotpotqa", path="data/hotpotqa/dev.jsonl") == few


def test_raw_source() -> None:
    questions = load_questions(
        "2wikimultihopqa", DataSource.RAW, path=RAW / "2wiki_dev_sample.json"
    )
    assert [q.question_id for q in questions] == [
        "0016373a0bda11eba7f7acde48001122",
        "0120a36108d611ebbd98ac1f6bf848b6",
    ]


def test_raw_source_needs_a_path() -> None:
    with pytest.raises(ValueError, match="musique_ans_v1.0_dev.jsonl"):
        load_questions("musique", "raw")


def test_hub_source_takes_no_path() -> None:
    with pytest.raises(ValueError, match="takes no path"):
        load_questions("musique", "hub", path="x.jsonl")


def test_missing_default_split_says_how_to_get_it() -> None:
    with pytest.raises(FileNotFoundError) as info:
        load_questions("musique", split="train")
    message = str(info.value)
    assert str(Path("data") / "musique" / "train.jsonl") in message
    assert "source=raw" in message and "source=hub" in message and "write_normalized" in message


def test_missing_explicit_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="gone.jsonl"):
        load_questions("hotpotqa", path=tmp_path / "gone.jsonl")


def test_file_of_another_dataset_is_rejected() -> None:
    with pytest.raises(
        DataFormatError, match="record 0: field 'dataset'.*is from hotpotqa, not musique"
    ):
        load_questions("musique", path=default_normalized_path("hotpotqa"))


def test_unknown_source_and_dataset() -> None:
    with pytest.raises(ValueError, match="ftp"):
        load_questions("hotpotqa", "ftp")
    with pytest.raises(ValueError, match="squad"):
        load_questions("squad")


def test_bundled_train_questions_are_real_hotpotqa_train_disjoint_from_dev() -> None:
    train = load_questions("hotpotqa", split="train")
    dev = load_questions("hotpotqa")
    assert len(train) == 857
    assert not {q.question_id for q in train} & {q.question_id for q in dev}
    assert all(sum(p.is_supporting for p in q.paragraphs) == 2 for q in train)
