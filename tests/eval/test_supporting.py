"""Supporting-sentence recall on a hand-built corpus: fact -> sentence id, seen sentences, scores."""

from __future__ import annotations

import pytest

from grasp.corpus.corpus import SentenceCorpus
from grasp.env.episode import TurnRecord
from grasp.eval.policy_eval import score_episodes
from grasp.eval.supporting import SupportingSentences, seen_sentence_ids, supporting_sentences
from grasp.types import DatasetName, Paragraph, Question, SupportingFact

A = Paragraph("A", ("a0.", "a1.", "a2."), is_supporting=True)
B = Paragraph("B", ("b0.", "b1."), is_supporting=True)
C = Paragraph("C", ("c0.", "c1."))
D = Paragraph("D", ("d0.", "d1."), is_supporting=True)


def _question(qid: str, paragraphs: tuple[Paragraph, ...], facts) -> Question:
    return Question(
        qid,
        DatasetName.TWOWIKI,
        f"{qid}?",
        ("x",),
        "compositional",
        paragraphs,
        tuple(SupportingFact(paragraphs[i].title, i, s) for i, s in facts),
    )


# Sentence ids: A 0-2, B 3-4, C 5-6 (q1), then D 7-8 (q2; its B is q1's B, stored once).
Q1 = _question("q1", (A, B, C), [(0, 1), (1, 0), (1, 5)])  # (B, 5) points past B's end
Q2 = _question("q2", (D, B), [(1, 1), (0, None)])
Q3 = _question("q3", (A, C), [(0, None)])  # paragraph-level facts only (MuSiQue-like)
Q4 = _question("q4", (A, C), [(0, 7)])  # its only sentence fact is out of range


@pytest.fixture(scope="module")
def corpus() -> SentenceCorpus:
    return SentenceCorpus.from_questions([Q1, Q2, Q3, Q4])


def test_facts_map_to_corpus_sentence_ids(corpus):
    assert corpus.num_sentences == 9
    assert supporting_sentences(corpus, Q1) == SupportingSentences(frozenset({1, 3}), 1)
    assert supporting_sentences(corpus, Q2) == SupportingSentences(frozenset({4}), 0)
    assert supporting_sentences(corpus, Q3) is None
    assert supporting_sentences(corpus, Q4) is None


def test_a_paragraph_missing_from_the_corpus_is_an_error():
    small = SentenceCorpus.from_questions([Q3])
    with pytest.raises(KeyError, match="'B'.*'q1'"):
        supporting_sentences(small, Q1)


def _hits(*pairs: tuple[int | None, int]) -> TurnRecord:
    hits = [{"sentence_id": s, "paragraph_id": p, "score": 1.0} for s, p in pairs]
    return TurnRecord(text="", hits=hits)


def test_seen_sentences_are_hits_whole_paragraph_hits_and_reads(corpus, trajectory):
    # A sentence hit (s1), a paragraph-granularity hit of C (s5, s6), a read of B (s3, s4).
    t = trajectory("q1#0", "x", ("x",), {0, 1}, read={1}, turns=[_hits((1, 0), (None, 2))])
    assert seen_sentence_ids(corpus, t) == {1, 3, 4, 5, 6}
    unread = trajectory("q1#1", "x", ("x",), {0, 1}, turns=[_hits((1, 0), (None, 2))])
    assert seen_sentence_ids(corpus, unread) == {1, 5, 6}


def test_score_episodes_exact_values(corpus, trajectory):
    trajectories = [
        trajectory("q1#0", "x", ("x",), {0, 1}, read={1}, turns=[_hits((1, 0))]),  # 2 of 2
        trajectory("q1#1", "x", ("x",), {0, 1}, turns=[_hits((1, 0), (2, 0))]),  # 1 of 2
        trajectory("q2#0", "x", ("x",), {3, 1}, turns=[_hits((3, 1))]),  # s4 unseen: 0 of 1
        trajectory("q3#0", "x", ("x",), {0}, read={0}),  # no sentence-level facts
    ]
    scores = score_episodes(corpus, [Q1, Q2, Q3], trajectories)
    assert scores.supporting_recall == {"q1#0": 1.0, "q1#1": 0.5, "q2#0": 0.0}
    assert scores.supporting_all_found == {"q1#0": 1.0, "q1#1": 0.0, "q2#0": 0.0}
    # The facts' sentence ids, against which citations are scored: A's s1 and B's s3; B's s4.
    q1 = frozenset({1, 3})
    assert scores.supporting_sentence_ids == {"q1#0": q1, "q1#1": q1, "q2#0": frozenset({4})}
    assert scores.verdicts is None
    # Every episode's question type, sentence-level facts or not (EM by kind of question).
    assert scores.question_types == dict.fromkeys(("q1#0", "q1#1", "q2#0", "q3#0"), "compositional")
