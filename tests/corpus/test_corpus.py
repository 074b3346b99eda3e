"""The pooled sentence corpus: ids, de-duplication, scopes and persistence."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grasp.corpus import SentenceCorpus
from grasp.types import DatasetName, Granularity, Paragraph, Question

sentence_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
paragraphs = st.builds(
    Paragraph,
    title=st.text(min_size=1, max_size=10),
    sentences=st.lists(sentence_text, min_size=0, max_size=5).map(tuple),
    is_supporting=st.booleans(),
)
questions = st.lists(
    st.builds(
        Question,
        question_id=st.uuids().map(str),
        dataset=st.just(DatasetName.HOTPOTQA),
        question=st.just("q"),
        answers=st.just(("a",)),
        type=st.just("bridge"),
        paragraphs=st.lists(paragraphs, min_size=1, max_size=6).map(tuple),
        supporting_facts=st.just(()),
    ),
    min_size=1,
    max_size=5,
    unique_by=lambda q: q.question_id,
)


@settings(max_examples=150, deadline=None)
@given(questions)
def test_every_sentence_points_back_to_a_paragraph_containing_it(qs):
    corpus = SentenceCorpus.from_questions(qs)
    for sentence_id in range(corpus.num_sentences):
        paragraph_id = corpus.paragraph_of(sentence_id)
        assert sentence_id in corpus.sentence_ids(paragraph_id)
    for question in qs:
        scope = corpus.question_scope(question.question_id)
        assert len(scope) == len(question.paragraphs)
        for paragraph, paragraph_id in zip(question.paragraphs, scope, strict=True):
            assert corpus.title(paragraph_id) == paragraph.title
            assert tuple(corpus.paragraph_sentences(paragraph_id)) == paragraph.sentences
    distinct = {(p.title, p.sentences) for q in qs for p in q.paragraphs}
    assert corpus.num_paragraphs == len(distinct)
    assert corpus.num_sentences == sum(len(s) for _, s in distinct)


def test_identical_paragraphs_are_stored_once(tiny_questions):
    corpus = SentenceCorpus.from_questions(tiny_questions)
    # 12 paragraph slots over 3 questions, 8 distinct paragraphs.
    assert len(corpus.question_paragraph_ids) == 12
    assert corpus.num_paragraphs == 8
    curie_in_q1 = corpus.question_scope("q-curie")[0]
    curie_in_q2 = corpus.question_scope("q-hillary")[3]
    assert curie_in_q1 == curie_in_q2
    assert corpus.title(curie_in_q1) == "Marie Curie"


def test_gold_paragraph_ids_follow_the_question(tiny_questions):
    corpus = SentenceCorpus.from_questions(tiny_questions)
    question = tiny_questions[1]
    gold = corpus.gold_paragraph_ids(question)
    assert {corpus.title(p) for p in gold} == {"Edmund Hillary", "Auckland"}


def test_gold_paragraph_missing_from_corpus_is_an_error(tiny_questions):
    corpus = SentenceCorpus.from_questions(tiny_questions[:1])
    with pytest.raises(KeyError, match="Edmund Hillary"):
        corpus.gold_paragraph_ids(tiny_questions[1])


def test_unknown_question_scope_names_the_question(tiny_questions):
    corpus = SentenceCorpus.from_questions(tiny_questions)
    with pytest.raises(KeyError, match="q-missing"):
        corpus.question_scope("q-missing")


def test_scope_units_lists_the_sentences_of_the_scoped_paragraphs(tiny_questions):
    corpus = SentenceCorpus.from_questions(tiny_questions)
    scope = corpus.question_scope("q-python")
    units = corpus.scope_units(scope, Granularity.SENTENCE)
    expected = sorted(s for p in set(scope.tolist()) for s in corpus.sentence_ids(p))
    assert units.tolist() == expected
    assert corpus.scope_units(scope, Granularity.PARAGRAPH).tolist() == sorted(set(scope.tolist()))


def test_indexed_texts_carry_the_title_and_shown_texts_do_not(tiny_questions):
    corpus = SentenceCorpus.from_questions(tiny_questions)
    (batch,) = corpus.unit_texts(Granularity.SENTENCE, prepend_title=True)
    assert batch[0] == "Marie Curie: " + corpus.sentence(0)
    (bare,) = corpus.unit_texts(Granularity.SENTENCE, prepend_title=False)
    assert bare[0] == corpus.sentence(0)
    (paragraph_batch,) = corpus.unit_texts(Granularity.PARAGRAPH, prepend_title=False)
    assert paragraph_batch[1] == "Warsaw: " + corpus.paragraph_text(1)
    assert len(paragraph_batch) == corpus.num_paragraphs


def test_save_and_load_round_trip(tiny_questions, tmp_path):
    corpus = SentenceCorpus.from_questions(tiny_questions)
    corpus.save(tmp_path)
    loaded = SentenceCorpus.load(tmp_path)
    assert loaded.fingerprint() == corpus.fingerprint()
    assert loaded.sentence_text.to_pylist() == corpus.sentence_text.to_pylist()
    np.testing.assert_array_equal(loaded.sentence_paragraph_id, corpus.sentence_paragraph_id)
    np.testing.assert_array_equal(
        loaded.question_scope("q-hillary"), corpus.question_scope("q-hillary")
    )
    assert loaded.gold_paragraph_ids(tiny_questions[2]) == corpus.gold_paragraph_ids(
        tiny_questions[2]
    )


def test_fingerprint_changes_with_content(tiny_questions):
    base = SentenceCorpus.from_questions(tiny_questions).fingerprint()
    assert SentenceCorpus.from_questions(tiny_questions).fingerprint() == base
    assert SentenceCorpus.from_questions(tiny_questions[:2]).fingerprint() != base
    assert SentenceCorpus.from_questions(tiny_questions[::-1]).fingerprint() != base


def test_memory_is_columnar(tiny_questions):
    corpus = SentenceCorpus.from_questions(tiny_questions)
    text_bytes = sum(len(s.encode()) for s in corpus.sentence_text.to_pylist())
    # UTF-8 bytes plus a few fixed-width ids per row: no Python object per sentence.
    assert corpus.nbytes() < text_bytes + 64 * (corpus.num_sentences + corpus.num_paragraphs) + 512
