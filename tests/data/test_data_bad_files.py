"""Data files that are bad below the schema (bytes, nesting, number sizes), or empty in it.

Issue 18 §5 item 11: the first three failed with an error naming neither file nor line
(``UnicodeDecodeError``, ``RecursionError``, Python's integer-size ``ValueError``). Item 16:
an empty id, question or answer, no paragraphs, or a directory given as the file, were
accepted or misreported.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grasp.data import DataFormatError, load_normalized, load_questions, load_raw
from grasp.types import DatasetName

RAW = Path(__file__).resolve().parents[1] / "fixtures" / "raw"
GOOD_LINE = (RAW / "musique_ans_dev_sample.jsonl").read_text(encoding="utf-8").splitlines()[0]
NORMALIZED_LINE = json.dumps(
    {
        "id": "q1",
        "dataset": "musique",
        "question": "Which?",
        "answers": ["yes"],
        "type": "2hop",
        "paragraphs": [{"idx": 0, "title": "A", "sentences": ["A one."], "is_supporting": True}],
        "supporting_facts": [["A", -1]],
    }
)
BAD_LINES = {
    "non-UTF-8": (b'{"id": "caf\xe9"}', r"not UTF-8 text \(byte 0xe9 at byte 12 of the line\)"),
    "nested": (b"[" * 100_000 + b"]" * 100_000, "a value nested too deeply to read"),
    "long integer": (b'{"id": ' + b"9" * 5000 + b"}", r"invalid JSON \(Exceeds the limit"),
}


def _load(kind: str, path: Path):
    if kind == "normalized":
        return load_normalized(path)
    return load_raw(path, DatasetName.MUSIQUE)


@pytest.mark.parametrize("kind", ["normalized", "raw"])
@pytest.mark.parametrize("bad", list(BAD_LINES))
def test_a_bad_json_lines_line_is_named(kind: str, bad: str, tmp_path: Path) -> None:
    good = NORMALIZED_LINE if kind == "normalized" else GOOD_LINE
    line, message = BAD_LINES[bad]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(good.encode() + b"\n\n" + line + b"\n" + good.encode() + b"\n")
    with pytest.raises(DataFormatError, match=f"^{path}, line 3: {message}") as caught:
        _load(kind, path)
    assert caught.value.line == 3


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b'"caf\xe9"', r"line 3: not UTF-8 text \(byte 0xe9 at byte 7 of the line\)"),
        (b"[" * 100_000 + b"]" * 100_000, "line 3: a value nested too deeply to read"),
        (b"9" * 5000, r"line 3: invalid JSON \(Exceeds the limit \(4300 digits\)"),
    ],
    ids=list(BAD_LINES),
)
def test_a_bad_official_json_file_names_the_line(bad: bytes, message: str, tmp_path: Path):
    records = json.loads((RAW / "hotpot_dev_distractor_sample.json").read_text(encoding="utf-8"))
    head = json.dumps(records[0]).encode()
    path = tmp_path / "hotpot.json"
    path.write_bytes(b"[\n" + head + b",\n  " + bad + b",\n" + head + b"\n]\n")
    with pytest.raises(DataFormatError, match=f"^{path}, {message}"):
        load_raw(path, DatasetName.HOTPOTQA)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r.update(id=""), "id"),
        (lambda r: r.update(question="  "), "question"),
        (lambda r: r.update(answers=["yes", ""]), r"answers\[1\]"),
        (lambda r: r.update(paragraphs=[], supporting_facts=[]), "paragraphs"),
    ],
)
def test_an_empty_field_of_a_normalized_record_is_refused(edit, field: str, tmp_path: Path):
    """Issue 18 §5 item 16: an empty id, question or answer, or no paragraphs, is refused."""
    record = json.loads(NORMALIZED_LINE)
    edit(record)
    path = tmp_path / "empty.jsonl"
    path.write_text(NORMALIZED_LINE + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=f"^{path}, line 2: field '{field}': is empty"):
        load_normalized(path)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r.update(_id=""), "_id"),
        (lambda r: r.update(question=""), "question"),
        (lambda r: r.update(answer=" "), "answer"),
        (lambda r: r.update(context=[], supporting_facts=[]), "context"),
    ],
)
def test_an_empty_field_of_an_official_json_record_is_refused(edit, field: str, tmp_path: Path):
    records = json.loads((RAW / "hotpot_dev_distractor_sample.json").read_text(encoding="utf-8"))
    edit(records[1])
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(DataFormatError, match=f"^{path}, record 1: field '{field}': is empty"):
        load_raw(path, DatasetName.HOTPOTQA)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r.update(answer=""), "answer"),
        (lambda r: r.update(answer_aliases=["x", ""]), r"answer_aliases\[1\]"),
        (lambda r: r.update(question="\n"), "question"),
        (lambda r: r.update(paragraphs=[]), "paragraphs"),
    ],
)
def test_an_empty_field_of_a_musique_record_is_refused(edit, field: str, tmp_path: Path):
    record = json.loads(GOOD_LINE)
    edit(record)
    path = tmp_path / "musique.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=f"^{path}, line 1: field '{field}': is empty"):
        load_raw(path, DatasetName.MUSIQUE)


def test_a_directory_is_reported_as_a_directory(tmp_path: Path) -> None:
    """Issue 18 §5 item 16: not "not found", which sends the user looking for a missing file."""
    with pytest.raises(IsADirectoryError, match="a directory, not a normalized data file"):
        load_normalized(tmp_path)
    with pytest.raises(IsADirectoryError, match=r"a directory, not an official musique file"):
        load_raw(tmp_path, DatasetName.MUSIQUE)
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        load_questions(DatasetName.HOTPOTQA, path=tmp_path)


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_a_data_file_without_questions_is_named_as_empty(text: str, tmp_path: Path) -> None:
    """Issue 48 (minor): an empty dataset file ended, after the index, in "env.top_k=5 exceeds
    the sentences in the corpus (0)"."""
    path = tmp_path / "dev.jsonl"
    path.write_text(text, encoding="utf-8")
    message = f"^{path}: holds no questions \\(the file is empty\\)$"
    with pytest.raises(DataFormatError, match=message):
        load_normalized(path)
    with pytest.raises(DataFormatError, match=message):
        load_questions(DatasetName.HOTPOTQA, path=path)
    with pytest.raises(DataFormatError, match=message):
        load_raw(path, DatasetName.MUSIQUE)
    official = tmp_path / "hotpot.json"
    official.write_text("[]\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=f"^{official}: holds no questions"):
        load_raw(official, DatasetName.HOTPOTQA)
