"""Near-duplicate detection at index build: off by default, drops copies, never gold."""

from __future__ import annotations

import dataclasses

import pytest

from grasp.corpus import IndexConfig, build_index
from grasp.corpus.build import config_from_manifest
from grasp.corpus.corpus import SentenceCorpus
from grasp.corpus.manifest import Manifest
from grasp.corpus.near_duplicates import NearDuplicateConfig, NearDuplicateFilter, similarity
from grasp.types import Paragraph

BASE = (
    "The Vistula is the longest river in Poland, flowing through Krakow and Warsaw",
    "It rises in the Silesian Beskids and drains into the Baltic Sea near Gdansk.",
)


def copies(n: int) -> tuple[Paragraph, ...]:
    return tuple(Paragraph("Vistula", (*BASE, f"Copy number {i} was kept.")) for i in range(n))


def with_copies(question, n: int):
    return dataclasses.replace(question, paragraphs=(*question.paragraphs, *copies(n)))


def test_detection_is_off_by_default_and_the_build_fields_do_not_name_it():
    config = IndexConfig()
    assert config.near_duplicates.threshold == 0.0 and not config.near_duplicates.enabled
    assert "near_duplicates" not in config.build_fields()  # older indexes keep their key
    with pytest.raises(ValueError, match="threshold is 0"):
        NearDuplicateFilter(config.near_duplicates)


def test_the_copies_are_near_duplicates_and_real_paragraphs_are_not(tiny_questions):
    config = NearDuplicateConfig(threshold=0.6)
    made = copies(3)
    assert similarity(made[0], made[1], config) >= 0.6
    curie, warsaw = tiny_questions[0].paragraphs[:2]
    assert similarity(curie, warsaw, config) < 0.2


def test_the_filter_keeps_the_first_copy_and_counts_the_others(tiny_questions):
    questions = [with_copies(tiny_questions[0], 4), *tiny_questions[1:]]
    near = NearDuplicateFilter(NearDuplicateConfig(threshold=0.6))
    corpus = SentenceCorpus.from_questions(near.questions(questions))
    plain = SentenceCorpus.from_questions(questions)
    assert plain.num_paragraphs - corpus.num_paragraphs == 3
    assert near.report() == {
        "threshold": 0.6,
        "num_perm": 128,
        "shingle_words": 3,
        "seed": 1,
        "paragraphs_dropped": 3,
        "sentences_dropped": 9,
    }
    kept = corpus.paragraph_id_of(copies(4)[0])
    assert kept is not None and corpus.paragraph_id_of(copies(4)[1]) is None
    assert list(corpus.question_scope("q-curie")).count(kept) == 4  # each copy stored as it
    for question in tiny_questions:  # the gold evidence is all there
        assert len(corpus.gold_paragraph_ids(question)) == 2


def test_a_supporting_paragraph_is_never_dropped(tiny_questions):
    question = tiny_questions[0]
    gold = Paragraph("Vistula", (*BASE, "Copy number 9 was kept."), is_supporting=True)
    first = dataclasses.replace(question, question_id="q-first", paragraphs=copies(1))
    second = dataclasses.replace(question, paragraphs=(*question.paragraphs, gold))
    near = NearDuplicateFilter(NearDuplicateConfig(threshold=0.6))
    corpus = SentenceCorpus.from_questions(near.questions([first, second]))
    assert near.paragraphs_dropped == 0
    assert corpus.paragraph_id_of(gold) is not None


def test_the_manifest_reports_the_dropped_units_and_a_load_rebuilds_the_setting(
    tmp_path, tiny_questions
):
    questions = [with_copies(q, 3) for q in tiny_questions]  # the same 3 copies each time
    config = IndexConfig(near_duplicates=NearDuplicateConfig(threshold=0.6))
    manifest = build_index(questions, config, tmp_path / "index")
    assert manifest.corpus["near_duplicates"]["paragraphs_dropped"] == 2
    assert manifest.corpus["near_duplicates"]["sentences_dropped"] == 6
    assert manifest.config["near_duplicates"]["threshold"] == 0.6
    read = Manifest.read(tmp_path / "index")
    rebuilt = config_from_manifest(read.config, tmp_path / "index" / "manifest.json")
    assert rebuilt.near_duplicates == config.near_duplicates
    assert rebuilt.build_fields() == config.build_fields()
