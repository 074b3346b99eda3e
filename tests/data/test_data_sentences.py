"""Tests of grasp.data.sentences: exact splits, the whitespace invariant, and MuSiQue agreement."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grasp.data import REPO_ROOT
from grasp.data.sentences import ABBREVIATIONS, split_sentences


def _normalize(text: str) -> str:
    return " ".join(text.split())


CASES = [
    ("", []),
    ("   \n\t ", []),
    ("No terminator at all", ["No terminator at all"]),
    ("One.  Two.\nThree.", ["One.", "Two.", "Three."]),
    (
        "Dr. Smith met J. R. R. Tolkien. They talked.",
        ["Dr. Smith met J. R. R. Tolkien.", "They talked."],
    ),
    ("Mr. and Mrs. Smith came. They sat.", ["Mr. and Mrs. Smith came.", "They sat."]),
    (
        "She lived in the U.S. During the war she left.",
        ["She lived in the U.S. During the war she left."],
    ),
    ("It was built in the U.S.A. Later it moved.", ["It was built in the U.S.A. Later it moved."]),
    ("Smith et al. Proposed it. Others agreed.", ["Smith et al. Proposed it.", "Others agreed."]),
    ("See e.g. Table 2. It shows i.e. The rest.", ["See e.g. Table 2.", "It shows i.e. The rest."]),
    ("Born on Jan. 5, 1990. He died on Feb. 2.", ["Born on Jan. 5, 1990.", "He died on Feb. 2."]),
    (
        "It reached No. 1 in the charts. Acme Inc. Sold it.",
        ["It reached No. 1 in the charts.", "Acme Inc. Sold it."],
    ),
    (
        "Bob Jr. Went home. Ltd. Co. Etc. Vs. Ends.",
        ["Bob Jr. Went home.", "Ltd. Co. Etc. Vs. Ends."],
    ),
    ("Wait... What?! Yes.", ["Wait...", "What?!", "Yes."]),
    ('He said "Hi." Then he left.', ['He said "Hi."', "Then he left."]),
    ("He cried 'Stop!' Then ran.", ["He cried 'Stop!'", "Then ran."]),
    ("Is it? (Yes.) Maybe.", ["Is it?", "(Yes.)", "Maybe."]),
    ("It is 3 m high (10 ft). The town grew.", ["It is 3 m high (10 ft).", "The town grew."]),
    ("The hill rises 3 m. (1 m). Then it falls.", ["The hill rises 3 m. (1 m).", "Then it falls."]),
    ("Version 2.0 is out. 3 bugs were fixed.", ["Version 2.0 is out.", "3 bugs were fixed."]),
    ("It ends. and goes on. ok", ["It ends. and goes on. ok"]),
    ("Hello. ``Quoted'' text.", ["Hello.", "``Quoted'' text."]),
    ("A storm. '' Then calm.", ["A storm. '' Then calm."]),
    ('He wrote (, lit. "the book of paths").', ['He wrote (, lit. "the book of paths").']),
    ('The last letter is "T". Only that.', ['The last letter is "T". Only that.']),
    (
        "Koch, Op. 58 was written. Tie (est.) Ratio",
        ["Koch, Op. 58 was written.", "Tie (est.) Ratio"],
    ),
    ("Über alles. Élan vital.", ["Über alles.", "Élan vital."]),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_split_sentences_table(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_abbreviation_list_is_lower_case_without_periods() -> None:
    assert all(a == a.lower() and not a.endswith(".") for a in ABBREVIATIONS)
    assert {
        "dr",
        "mr",
        "mrs",
        "st",
        "u.s",
        "jan",
        "feb",
        "et al",
        "e.g",
        "i.e",
        "vs",
        "no",
    } <= ABBREVIATIONS
    assert {"inc", "ltd", "jr", "etc"} <= ABBREVIATIONS


# Text drawn from a small alphabet hits the rules (terminators, quotes, initials) far more
# often than arbitrary Unicode; arbitrary text covers odd whitespace and scripts.
_RULE_ALPHABET = list(".!?\"'`“”()[] \t\n\u00a0\u2028AaBbJjUSseglN0123")
_TEXT = st.one_of(st.text(), st.text(alphabet=_RULE_ALPHABET, max_size=80))


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_joined_sentences_give_back_the_text(text: str) -> None:
    sentences = split_sentences(text)
    assert _normalize(" ".join(sentences)) == _normalize(text)
    for sentence in sentences:
        assert sentence and sentence == sentence.strip()
        assert split_sentences(sentence) == [sentence]


def test_splitter_reproduces_every_bundled_musique_paragraph() -> None:
    """The bundled MuSiQue sentences were made by these rules: raw and normalized must agree."""
    checked = 0
    with (REPO_ROOT / "data" / "musique" / "dev.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            for paragraph in json.loads(line)["paragraphs"]:
                sentences = paragraph["sentences"]
                assert split_sentences(" ".join(sentences)) == sentences, paragraph["title"]
                checked += 1
    assert checked == 331 * 20
