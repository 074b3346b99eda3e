"""Single-step retrieval recall: search once with the question, count the gold paragraphs found.

This is the paper's single-step baseline and the reference every policy is compared with:
top-k hits for the question text, at sentence granularity (a sentence hit finds its parent
paragraph) and at paragraph granularity, for BM25, dense and hybrid (reciprocal-rank fusion).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grasp.corpus.index import CorpusIndex
from grasp.metrics import all_gold_found, bootstrap_ci, paragraph_recall
from grasp.types import Granularity, Question, Retriever


@dataclass(frozen=True)
class RecallResult:
    """Recall of gold paragraphs over questions for one granularity and retriever."""

    recall: float
    """Mean fraction of each question's gold paragraphs found."""
    all_gold: float
    """Fraction of questions whose gold paragraphs were all found."""
    recall_ci: tuple[float, float]
    """95% bootstrap interval of ``recall`` over questions."""
    n: int

    def as_dict(self) -> dict[str, object]:
        return {
            "recall": self.recall,
            "all_gold": self.all_gold,
            "recall_ci": list(self.recall_ci),
            "n": self.n,
        }


def single_step_recall(
    index: CorpusIndex,
    questions: Sequence[Question],
    retriever: Retriever,
    granularity: Granularity,
    k: int = 5,
) -> RecallResult:
    """Recall@k of gold paragraphs when each question is searched once with its own text."""
    hits = index.search([q.question for q in questions], retriever, k=k, granularity=granularity)
    recalls, complete = [], []
    for question, question_hits in zip(questions, hits, strict=True):
        gold = index.corpus.gold_paragraph_ids(question)
        found = {hit.paragraph_id for hit in question_hits}
        recalls.append(paragraph_recall(found, gold))
        complete.append(all_gold_found(found, gold))
    interval = bootstrap_ci(recalls)
    return RecallResult(
        recall=interval.mean,
        all_gold=sum(complete) / max(len(complete), 1),
        recall_ci=(interval.low, interval.high),
        n=len(recalls),
    )
