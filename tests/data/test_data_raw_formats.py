"""Tests of grasp.data.raw_formats on hand-made fixtures in the official release layouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grasp.data import DataFormatError, default_normalized_path, load_normalized, load_raw
from grasp.data.raw_formats import musique_question
from grasp.types import DatasetName, Question, SupportingFact

RAW = Path(__file__).resolve().parents[1] / "fixtures" / "raw"
HOTPOT = RAW / "hotpot_dev_distractor_sample.json"
TWOWIKI = RAW / "2wiki_dev_sample.json"
MUSIQUE = RAW / "musique_ans_dev_sample.jsonl"


def _titles(q: Question) -> list[str]:
    return [p.title for p in q.paragraphs]


def _sentence_counts(q: Question) -> list[int]:
    return [len(p.sentences) for p in q.paragraphs]


def test_hotpotqa_fixture() -> None:
    first, second = load_raw(HOTPOT, DatasetName.HOTPOTQA)
    assert first.question_id == "5a8b57f25542995d1e6f1371"
    assert first.dataset is DatasetName.HOTPOTQA
    assert first.answers == ("yes",)
    assert first.type == "comparison"
    assert first.meta == {"level": "hard"}
    assert _titles(first) == ["Ed Wood (film)", "Scott Derrickson", "Tyler Bates", "Ed Wood"]
    assert _sentence_counts(first) == [3, 3, 5, 1]
    assert first.gold_paragraph_indices == (1, 3)
    assert first.supporting_facts == (
        SupportingFact("Scott Derrickson", 1, 0),
        SupportingFact("Ed Wood", 3, 0),
    )
    # The official file starts every sentence after the first with a space; it is stripped.
    assert first.paragraphs[1].sentences[1] == "He lives in Los Angeles, California."

    assert second.question_id == "5a711bb55542994082a3e597"
    assert second.answers == ("The 7 Habits of Highly Effective People",)
    assert second.type == "bridge"
    assert second.gold_paragraph_indices == (1, 2)
    assert second.supporting_facts == (
        SupportingFact("The 7 Habits of Highly Effective Teens", 2, 0),
        SupportingFact("Stephen Covey", 1, 0),
        SupportingFact("Stephen Covey", 1, 1),
    )
    assert _sentence_counts(second) == [3, 4, 3, 4]


def test_twowiki_fixture() -> None:
    first, second = load_raw(TWOWIKI, "2wikimultihopqa")
    assert first.question_id == "0016373a0bda11eba7f7acde48001122"
    assert first.dataset is DatasetName.TWOWIKI
    assert first.answers == ("2 February 1345",)
    assert first.type == "compositional"
    assert first.gold_paragraph_indices == (0, 2)
    assert first.supporting_facts == (
        SupportingFact("Hermann II, Landgrave of Hesse", 0, 1),
        SupportingFact("Louis the Junker", 2, 0),
    )
    assert _sentence_counts(first) == [10, 2, 2, 5]
    assert first.meta == {
        "evidences": [
            ["Hermann II of Hesse", "father", "Louis the Junker"],
            ["Louis the Junker", "date of death", "2 February 1345"],
        ],
        "entity_ids": "Q469389_Q103697",
    }

    # The second record has no entity_ids (older release): meta keeps what is there.
    assert second.question_id == "0120a36108d611ebbd98ac1f6bf848b6"
    assert second.answers == ("yes",)
    assert second.type == "comparison"
    assert second.gold_paragraph_indices == (2, 3)
    assert [f.paragraph_index for f in second.supporting_facts] == [2, 3]
    assert set(second.meta) == {"evidences"}


def test_musique_fixture() -> None:
    first, second = load_raw(MUSIQUE, DatasetName.MUSIQUE)
    assert first.question_id == "2hop__107548_124896"
    assert first.type == "2hop"
    assert first.answers == ("Nicholas Bacon", "Sir Nicholas Bacon")
    assert first.gold_paragraph_indices == (2, 3)
    assert first.supporting_facts == (
        SupportingFact("Francis Bacon", 2, None),
        SupportingFact("Head I", 3, None),
    )
    assert _sentence_counts(first) == [4, 6, 2, 7]
    assert first.meta["answerable"] is True
    assert first.meta["supporting_paragraph_indices"] == [2, 3]
    assert [s["paragraph_support_idx"] for s in first.meta["question_decomposition"]] == [3, 2]

    assert second.question_id == "3hop1__106688_160713_77246"
    assert second.type == "3hop1"
    assert second.answers == (
        "the country of India",
        "IND",
        "IN",
        "India",
        "in",
        "Republic of India",
    )
    assert _titles(second).count("Partition of India") == 3
    assert second.gold_paragraph_indices == (3, 4, 7)
    assert [f.paragraph_index for f in second.supporting_facts] == [3, 4, 7]
    assert all(f.sentence_index is None for f in second.supporting_facts)
    assert _sentence_counts(second) == [4, 9, 11, 10, 4, 5, 7, 7, 7, 5]


@pytest.mark.parametrize(
    ("path", "dataset"),
    [
        (HOTPOT, DatasetName.HOTPOTQA),
        (TWOWIKI, DatasetName.TWOWIKI),
        (MUSIQUE, DatasetName.MUSIQUE),
    ],
)
def test_raw_paragraphs_match_the_bundled_normalized_copy(path: Path, dataset) -> None:
    """The fixtures are cut from real dev questions: raw conversion must give their sentences."""
    bundled = {q.question_id: q for q in load_normalized(default_normalized_path(dataset))}
    for question in load_raw(path, dataset):
        reference = bundled[question.question_id]
        assert question.question == reference.question
        assert question.answers == reference.answers
        assert question.type == reference.type
        reference_paragraphs = {
            (p.title, p.sentences, p.is_supporting) for p in reference.paragraphs
        }
        for paragraph in question.paragraphs:
            assert (
                paragraph.title,
                paragraph.sentences,
                paragraph.is_supporting,
            ) in reference_paragraphs
        assert [(f.title, f.sentence_index) for f in question.supporting_facts] == [
            (f.title, f.sentence_index) for f in reference.supporting_facts
        ]


def _write_json(path: Path, records) -> Path:
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def _hotpot_records() -> list[dict]:
    return json.loads(HOTPOT.read_text(encoding="utf-8"))


def test_fullwiki_style_record_is_rejected(tmp_path: Path) -> None:
    records = _hotpot_records()
    records[1]["context"] = [c for c in records[1]["context"] if c[0] != "Stephen Covey"]
    path = _write_json(tmp_path / "fullwiki.json", records)
    with pytest.raises(
        DataFormatError, match=r"record 1: field 'supporting_facts\[1\]\[0\]'.*fullwiki"
    ):
        load_raw(path, DatasetName.HOTPOTQA)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.pop("_id"), "record 0: field '_id': missing"),
        (lambda r: r.pop("answer"), "record 0: field 'answer': missing"),
        (lambda r: r["context"].append(["Only title"]), r"field 'context\[4\]': expected \[title"),
        (lambda r: r["supporting_facts"].append(["Ed Wood", "0"]), "expected an integer, got str"),
    ],
)
def test_malformed_official_record(edit, message: str, tmp_path: Path) -> None:
    records = _hotpot_records()
    edit(records[0])
    with pytest.raises(DataFormatError, match=message):
        load_raw(_write_json(tmp_path / "bad.json", records), DatasetName.HOTPOTQA)


def test_official_json_must_be_a_list(tmp_path: Path) -> None:
    path = _write_json(tmp_path / "dict.json", {"data": []})
    with pytest.raises(DataFormatError, match="expected a JSON list of records, got dict"):
        load_raw(path, DatasetName.TWOWIKI)
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(DataFormatError, match="invalid JSON at line 1"):
        load_raw(path, DatasetName.TWOWIKI)


def test_musique_errors_name_the_line(tmp_path: Path) -> None:
    lines = MUSIQUE.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1])
    record["paragraphs"][4]["idx"] = 9
    path = tmp_path / "bad.jsonl"
    path.write_text(lines[0] + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"line 2: field 'paragraphs\[4\]\.idx': is 9"):
        load_raw(path, DatasetName.MUSIQUE)


@pytest.mark.parametrize(
    ("source", "dataset", "message"),
    [
        (
            HOTPOT,
            DatasetName.HOTPOTQA,
            r"record 2: field '_id': duplicate id '5a8b57f25542995d1e6f1371' \(first on record 0\)",
        ),
        (
            TWOWIKI,
            DatasetName.TWOWIKI,
            r"record 2: field '_id': duplicate id '0016373a0bda11eba7f7acde48001122' \(first on record 0\)",
        ),
        (
            MUSIQUE,
            DatasetName.MUSIQUE,
            r"line 3: field 'id': duplicate id '2hop__.*' \(first on line 1\)",
        ),
    ],
)
def test_a_repeated_id_is_an_error(source: Path, dataset, message: str, tmp_path: Path) -> None:
    """Issue 18 §5 item 5: a file concatenated with itself is refused, not evaluated twice."""
    path = tmp_path / source.name
    if dataset is DatasetName.MUSIQUE:
        lines = source.read_text(encoding="utf-8").splitlines()
        path.write_text("\n".join(lines * 2) + "\n", encoding="utf-8")
    else:
        records = json.loads(source.read_text(encoding="utf-8"))
        _write_json(path, records * 2)
    with pytest.raises(DataFormatError, match=f"{path}, {message}"):
        load_raw(path, dataset)


def test_musique_id_needs_a_hop_prefix() -> None:
    record = {"id": "107548", "question": "?", "answer": "a", "paragraphs": []}
    with pytest.raises(DataFormatError, match="field 'id'.*hop-pattern prefix"):
        musique_question(record)


def test_missing_raw_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="absent.json"):
        load_raw(tmp_path / "absent.json", DatasetName.HOTPOTQA)


def test_unknown_dataset_is_rejected() -> None:
    with pytest.raises(ValueError, match="squad"):
        load_raw(HOTPOT, "squad")
