"""Tests of grasp.data.normalized on the bundled files and on malformed input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grasp.data import (
    DataFormatError,
    default_normalized_path,
    load_normalized,
    question_from_dict,
    question_to_dict,
    write_normalized,
)
from grasp.types import DatasetName, Paragraph, Question, SupportingFact

BUNDLED_COUNTS = {
    DatasetName.HOTPOTQA: 485,
    DatasetName.TWOWIKI: 960,
    DatasetName.MUSIQUE: 331,
}


@pytest.fixture(scope="module")
def bundled() -> dict[DatasetName, list[Question]]:
    return {d: load_normalized(default_normalized_path(d)) for d in DatasetName}


@pytest.mark.parametrize("dataset", list(DatasetName))
def test_bundled_counts_and_gold(bundled: dict[DatasetName, list[Question]], dataset) -> None:
    questions = bundled[dataset]
    assert len(questions) == BUNDLED_COUNTS[dataset]
    assert len({q.question_id for q in questions}) == len(questions)
    for q in questions:
        assert q.dataset is dataset
        assert q.gold_paragraph_indices, q.question_id
        assert q.answers and q.question
        for fact in q.supporting_facts:
            assert q.paragraphs[fact.paragraph_index].title == fact.title
            assert q.paragraphs[fact.paragraph_index].is_supporting


def test_hotpotqa_spot_check(bundled: dict[DatasetName, list[Question]]) -> None:
    by_id = {q.question_id: q for q in bundled[DatasetName.HOTPOTQA]}
    q = by_id["5a8b57f25542995d1e6f1371"]
    assert q.question == "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert q.answers == ("yes",)
    assert q.type == "comparison"
    assert [(f.title, f.sentence_index) for f in q.supporting_facts] == [
        ("Scott Derrickson", 0),
        ("Ed Wood", 0),
    ]
    assert [q.paragraphs[f.paragraph_index].title for f in q.supporting_facts] == [
        "Scott Derrickson",
        "Ed Wood",
    ]
    assert q.meta["level"] and q.meta["setting"] == "distractor"


def test_paragraph_level_facts_have_no_sentence_index(bundled) -> None:
    musique = bundled[DatasetName.MUSIQUE]
    assert all(f.sentence_index is None for q in musique for f in q.supporting_facts)
    hotpot = [q for q in bundled[DatasetName.HOTPOTQA] if q.meta["sf_level"] == "paragraph"]
    assert len(hotpot) == 222
    assert all(f.sentence_index is None for q in hotpot for f in q.supporting_facts)


def test_musique_repeated_titles_use_the_pinned_indices(bundled) -> None:
    """Where two supporting paragraphs share a title, titles alone cannot place the facts."""
    repeated = 0
    for q in bundled[DatasetName.MUSIQUE]:
        pins = q.meta["supporting_paragraph_indices"]
        assert [f.paragraph_index for f in q.supporting_facts] == pins
        gold_titles = [q.paragraphs[i].title for i in q.gold_paragraph_indices]
        repeated += len(gold_titles) != len(set(gold_titles))
    assert repeated > 0


@pytest.mark.parametrize("dataset", list(DatasetName))
def test_round_trip_is_exact(bundled, dataset, tmp_path: Path) -> None:
    out = write_normalized(bundled[dataset], tmp_path / "copy.jsonl")
    again = load_normalized(out)
    assert again == bundled[dataset]
    assert [q.meta for q in again] == [q.meta for q in bundled[dataset]]
    assert out.read_bytes() == default_normalized_path(dataset).read_bytes()


def _question(facts_at: list[int], titles: list[str]) -> Question:
    paragraphs = tuple(
        Paragraph(t, (f"{t} one.", f"{t} two."), is_supporting=i in facts_at)
        for i, t in enumerate(titles)
    )
    return Question(
        question_id="q1",
        dataset=DatasetName.MUSIQUE,
        question="Who?",
        answers=("A", "B"),
        type="2hop",
        paragraphs=paragraphs,
        supporting_facts=tuple(SupportingFact(titles[i], i, None) for i in facts_at),
    )


def test_writer_pins_facts_that_titles_cannot_place(tmp_path: Path) -> None:
    question = _question([1, 2], ["Same", "Same", "Same"])
    record = question_to_dict(question)
    assert record["meta"]["supporting_paragraph_indices"] == [1, 2]
    assert record["supporting_facts"] == [["Same", -1], ["Same", -1]]
    loaded = load_normalized(write_normalized([question], tmp_path / "q.jsonl"))
    assert loaded == [question]


def test_writer_adds_no_pins_when_titles_suffice() -> None:
    record = question_to_dict(_question([0, 2], ["A", "B", "C"]))
    assert "supporting_paragraph_indices" not in record["meta"]
    assert question_from_dict(record) == _question([0, 2], ["A", "B", "C"])


def test_title_resolution_prefers_the_supporting_paragraph() -> None:
    record = question_to_dict(_question([1], ["X", "X"]))
    assert "supporting_paragraph_indices" not in record["meta"]  # titles suffice here
    assert question_from_dict(record).supporting_facts[0].paragraph_index == 1


def _valid_record() -> dict:
    return {
        "id": "q1",
        "dataset": "hotpotqa",
        "question": "Which?",
        "answers": ["yes"],
        "type": "comparison",
        "paragraphs": [
            {"idx": 0, "title": "A", "sentences": ["A one.", "A two."], "is_supporting": True},
            {"idx": 1, "title": "B", "sentences": ["B one."], "is_supporting": False},
        ],
        "supporting_facts": [["A", 1]],
        "meta": {"level": "easy"},
    }


def _without(key: str):
    def edit(record: dict) -> None:
        del record[key]

    return edit


def _set(path: list, value):
    def edit(record: dict) -> None:
        target = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


MALFORMED = [
    (_without("id"), "field 'id': missing"),
    (_without("paragraphs"), "field 'paragraphs': missing"),
    (_set(["answers"], []), "field 'answers': must hold at least one answer"),
    (_set(["answers"], "yes"), "field 'answers': expected a list, got str"),
    (_set(["answers"], ["yes", 3]), "field 'answers[1]': expected a string, got int"),
    (_set(["dataset"], "squad"), "field 'dataset': unknown dataset 'squad'"),
    (_set(["paragraphs", 1, "idx"], 5), "field 'paragraphs[1].idx': is 5"),
    (_set(["paragraphs", 0, "is_supporting"], "yes"), "field 'paragraphs[0].is_supporting'"),
    (_set(["paragraphs", 1], "text"), "field 'paragraphs[1]': expected an object"),
    (_set(["supporting_facts", 0], ["A"]), "field 'supporting_facts[0]': expected [title"),
    (_set(["supporting_facts", 0, 0], "Z"), "'supporting_facts[0][0]': title 'Z' is not"),
    (_set(["supporting_facts", 0, 1], True), "'supporting_facts[0][1]': expected an integer"),
    (_set(["supporting_facts", 0, 1], -2), "sentence index -2 is below -1"),
    (_set(["meta"], []), "field 'meta': expected an object"),
    (_set(["meta", "supporting_paragraph_indices"], [0, 1]), "has 2 entries for 1"),
    (_set(["meta", "supporting_paragraph_indices"], [7]), "7 is not a paragraph position"),
    (_set(["meta", "supporting_paragraph_indices"], [1]), "differs from paragraph 1 ('B')"),
]


@pytest.mark.parametrize(("edit", "message"), MALFORMED)
def test_malformed_line_names_file_line_and_field(edit, message: str, tmp_path: Path) -> None:
    good, bad = _valid_record(), _valid_record()
    bad["id"] = "q2"
    edit(bad)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as info:
        load_normalized(path)
    assert str(info.value).startswith(f"{path}, line 3: ")
    assert message in str(info.value)
    assert info.value.line == 3
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("line", "message"),
    [("{not json", "invalid JSON"), ("[1, 2]", "expected an object, got list")],
)
def test_unparsable_line(line: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_valid_record()) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=f"line 2: .*{message}"):
        load_normalized(path)


def test_duplicate_id_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text((json.dumps(_valid_record()) + "\n") * 2, encoding="utf-8")
    with pytest.raises(
        DataFormatError, match=r"line 2: field 'id': duplicate id 'q1' \(first on line 1\)"
    ):
        load_normalized(path)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "dev.jsonl"
    with pytest.raises(FileNotFoundError, match="nowhere/dev.jsonl"):
        load_normalized(missing)


def test_missing_meta_defaults_to_empty(tmp_path: Path) -> None:
    record = _valid_record()
    del record["meta"]
    question = question_from_dict(record)
    assert question.meta == {}
    assert question.supporting_facts == (SupportingFact("A", 0, 1),)
