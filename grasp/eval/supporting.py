"""Supporting-sentence recall: how many of a question's gold sentences an episode ever saw.

HotpotQA and 2WikiMultiHopQA mark supporting facts as (title, sentence index); they map to
corpus sentence ids as ``first sentence of the paragraph + index``. An episode saw a
sentence when a search returned it (a sentence hit), when a search returned its whole
paragraph (paragraph granularity), or when it read its paragraph. MuSiQue (and HotpotQA
questions that carry ``[title, -1]`` facts only) have no sentence-level facts: they have no
supporting-sentence recall at all, rather than a recall of zero.

    sentences = supporting_sentences(index.corpus, question)   # None: not available
    seen = seen_sentence_ids(index.corpus, trajectory)
    paragraph_recall(seen, sentences.sentence_ids)             # the same set recall, over sentences
"""

from __future__ import annotations

from dataclasses import dataclass

from grasp.corpus.corpus import SentenceCorpus
from grasp.rollout.trajectory import Trajectory
from grasp.types import Question


@dataclass(frozen=True)
class SupportingSentences:
    """The corpus sentences named by a question's sentence-level supporting facts."""

    sentence_ids: frozenset[int]
    """Corpus sentence ids of the facts (never empty)."""
    out_of_range: int
    """Facts whose sentence index lies past the end of their paragraph (a dataset defect:
    one official 2Wiki question has one); they are left out of ``sentence_ids``."""


def supporting_sentences(corpus: SentenceCorpus, question: Question) -> SupportingSentences | None:
    """The question's supporting sentences in ``corpus``; None when it has no sentence-level
    fact that names an existing sentence.

    Raises:
        KeyError: a supporting paragraph is not in the corpus (the wrong index for the data).
    """
    ids: set[int] = set()
    out_of_range = 0
    for fact in question.supporting_facts:
        if fact.sentence_index is None:
            continue
        paragraph = question.paragraphs[fact.paragraph_index]
        paragraph_id = corpus.paragraph_id_of(paragraph)
        if paragraph_id is None:
            raise KeyError(
                f"supporting paragraph {paragraph.title!r} of question "
                f"{question.question_id!r} is not in this corpus"
            )
        if fact.sentence_index >= len(paragraph.sentences):
            out_of_range += 1
            continue
        ids.add(corpus.sentence_ids(paragraph_id)[fact.sentence_index])
    if not ids:
        return None
    return SupportingSentences(frozenset(ids), out_of_range)


def seen_sentence_ids(corpus: SentenceCorpus, trajectory: Trajectory) -> set[int]:
    """Every corpus sentence the episode was shown: sentence hits, whole-paragraph hits and
    the sentences of read paragraphs (a read counts the whole paragraph)."""
    seen: set[int] = set()
    for turn in trajectory.turns:
        for hit in turn.hits:
            if hit["sentence_id"] is not None:
                seen.add(int(hit["sentence_id"]))
            else:
                seen.update(corpus.sentence_ids(int(hit["paragraph_id"])))
    for paragraph_id in trajectory.read_paragraph_ids:
        seen.update(corpus.sentence_ids(paragraph_id))
    return seen
