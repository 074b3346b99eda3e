"""Tests of grasp.data.hub: the hub-layout converters and the offline error. No network used."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from grasp.data import (
    DataFormatError,
    HubUnavailableError,
    hotpotqa_from_hub,
    load_from_hub,
    load_questions,
    load_raw,
    musique_from_hub,
    twowiki_from_hub,
)
from grasp.data import hub as hub_module
from grasp.types import DatasetName, SupportingFact

RAW = Path(__file__).resolve().parents[1] / "fixtures" / "raw"

HOTPOT_HUB_RECORD = {
    "id": "5a8b57f25542995d1e6f1371",
    "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
    "answer": "yes",
    "type": "comparison",
    "level": "hard",
    "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood"], "sent_id": [0, 0]},
    "context": {
        "title": ["Ed Wood (film)", "Scott Derrickson", "Ed Wood"],
        "sentences": [
            ["Ed Wood is a 1994 film.", " It stars Johnny Depp."],
            ["Scott Derrickson (born 1966) is an American director.", " He lives in L.A."],
            ["Edward Davis Wood Jr. was an American filmmaker."],
        ],
    },
}


def test_hotpotqa_hub_record() -> None:
    q = hotpotqa_from_hub(HOTPOT_HUB_RECORD)
    assert q.question_id == "5a8b57f25542995d1e6f1371"
    assert q.dataset is DatasetName.HOTPOTQA
    assert q.answers == ("yes",)
    assert q.type == "comparison"
    assert q.meta == {"level": "hard"}
    assert q.gold_paragraph_indices == (1, 2)
    assert q.supporting_facts == (
        SupportingFact("Scott Derrickson", 1, 0),
        SupportingFact("Ed Wood", 2, 0),
    )
    assert q.paragraphs[1].sentences == (
        "Scott Derrickson (born 1966) is an American director.",
        "He lives in L.A.",
    )


def test_twowiki_hub_record_with_evidence_columns() -> None:
    record = {
        "_id": "0120a36108d611ebbd98ac1f6bf848b6",
        "type": "comparison",
        "question": "Do Samuel Langdon and Emil Aloysius Wcela share the same nationality?",
        "context": {
            "title": ["George Augustus", "Samuel Langdon", "Emil Aloysius Wcela"],
            "content": [
                ["George Augustus was a prince."],
                ["Samuel Langdon was American."],
                ["Emil Aloysius Wcela was American."],
            ],
        },
        "supporting_facts": {"title": ["Samuel Langdon", "Emil Aloysius Wcela"], "sent_id": [0, 0]},
        "evidences": {
            "fact": ["Samuel Langdon", "Emil Aloysius Wcela"],
            "relation": ["country of citizenship", "country of citizenship"],
            "entity": ["American", "American"],
        },
        "answer": "yes",
    }
    q = twowiki_from_hub(record)
    assert q.question_id == "0120a36108d611ebbd98ac1f6bf848b6"
    assert q.dataset is DatasetName.TWOWIKI
    assert q.answers == ("yes",)
    assert q.gold_paragraph_indices == (1, 2)
    assert [f.paragraph_index for f in q.supporting_facts] == [1, 2]
    assert q.meta == {
        "evidences": [
            ["Samuel Langdon", "country of citizenship", "American"],
            ["Emil Aloysius Wcela", "country of citizenship", "American"],
        ]
    }


def _to_hub_layout(official: dict) -> dict:
    """An official HotpotQA/2Wiki record in the hub's column layout (id, parallel lists)."""
    record = {k: v for k, v in official.items() if k not in {"_id", "context", "supporting_facts"}}
    record["id"] = official["_id"]
    record["context"] = {
        "title": [title for title, _ in official["context"]],
        "sentences": [sentences for _, sentences in official["context"]],
    }
    record["supporting_facts"] = {
        "title": [title for title, _ in official["supporting_facts"]],
        "sent_id": [sent_id for _, sent_id in official["supporting_facts"]],
    }
    if "evidences" in official:
        record["evidences"] = {
            key: [triple[k] for triple in official["evidences"]]
            for k, key in enumerate(("fact", "relation", "entity"))
        }
    return record


def _columns(rows: list[dict]) -> dict:
    return {key: [row[key] for row in rows] for key in rows[0]}


@pytest.mark.parametrize(
    ("file_name", "dataset", "convert"),
    [
        ("hotpot_dev_distractor_sample.json", DatasetName.HOTPOTQA, hotpotqa_from_hub),
        ("2wiki_dev_sample.json", DatasetName.TWOWIKI, twowiki_from_hub),
    ],
)
def test_hub_layout_gives_the_same_questions_as_raw(file_name: str, dataset, convert) -> None:
    official = json.loads((RAW / file_name).read_text(encoding="utf-8"))
    from_hub = [convert(_to_hub_layout(record)) for record in official]
    from_raw = load_raw(RAW / file_name, dataset)
    assert from_hub == from_raw
    assert [q.meta for q in from_hub] == [q.meta for q in from_raw]


@pytest.mark.parametrize("columnar", [False, True])
def test_musique_hub_records(columnar: bool) -> None:
    path = RAW / "musique_ans_dev_sample.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    if columnar:  # datasets may hand back a list of structs as parallel columns
        for record in records:
            record["paragraphs"] = _columns(record["paragraphs"])
            record["question_decomposition"] = _columns(record["question_decomposition"])
    from_hub = [musique_from_hub(record) for record in records]
    from_raw = load_raw(path, DatasetName.MUSIQUE)
    assert from_hub == from_raw
    assert [q.meta for q in from_hub] == [q.meta for q in from_raw]


def _clear_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


def test_offline_switch_raises_fast_with_the_local_alternative(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(HubUnavailableError) as info:
        load_from_hub(DatasetName.HOTPOTQA, "dev")
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert "hotpotqa/hotpot_qa" in message
    assert "source=normalized path=data/hotpotqa/dev.jsonl" in message
    assert "source=raw" in message and "hot" in message


def test_offline_through_load_questions(monkeypatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(HubUnavailableError, match="data/musique/dev.jsonl"):
        load_questions("musique", "hub")


def test_unreachable_endpoint_raises_fast(monkeypatch) -> None:
    _clear_offline(monkeypatch)
    # Port 9 (discard) on the loopback interface refuses the connection at once.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    start = time.monotonic()
    with pytest.raises(HubUnavailableError, match="framolfese/2WikiMultihopQA.*127.0.0.1:9"):
        load_from_hub(DatasetName.TWOWIKI)
    assert time.monotonic() - start < 5


def test_load_from_hub_with_a_stub_loader(monkeypatch) -> None:
    import datasets

    _clear_offline(monkeypatch)
    monkeypatch.setattr(hub_module, "_probe_hub", lambda timeout_s: None)
    calls = []

    def fake_load_dataset(repo, config, split):
        calls.append((repo, config, split))
        return [HOTPOT_HUB_RECORD]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    questions = load_from_hub("hotpotqa", "dev")
    assert calls == [("hotpotqa/hotpot_qa", "distractor", "validation")]
    assert [q.question_id for q in questions] == ["5a8b57f25542995d1e6f1371"]

    load_from_hub("2wikimultihopqa", "train", repo="someone/2wiki-copy")
    assert calls[-1] == ("someone/2wiki-copy", None, "train")


def test_loader_connection_errors_become_hub_unavailable(monkeypatch) -> None:
    import datasets

    _clear_offline(monkeypatch)
    monkeypatch.setattr(hub_module, "_probe_hub", lambda timeout_s: None)

    def failing_load_dataset(repo, config, split):
        raise ConnectionError(f"Couldn't reach '{repo}' on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", failing_load_dataset)
    with pytest.raises(HubUnavailableError, match="dgslibisey/MuSiQue.*ConnectionError") as info:
        load_from_hub("musique")
    assert isinstance(info.value.__cause__, ConnectionError)
    assert "data/musique/dev.jsonl" in str(info.value)


def test_malformed_hub_columns_are_reported() -> None:
    record = dict(HOTPOT_HUB_RECORD)
    record["context"] = {"title": ["only one title"], "sentences": [["a."], ["b."]]}
    with pytest.raises(DataFormatError, match="field 'context': expected a list, got dict"):
        hotpotqa_from_hub(record)
