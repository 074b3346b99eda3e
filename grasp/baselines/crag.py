"""CRAG: corrective retrieval (Yan et al., 2024), with the backend as the retrieval evaluator.

Turn 1 searches with the question. Turn 2: the backend grades each hit relevant or not (one
prompt per hit, all batched). When the share graded irrelevant is above ``crag_threshold``
(0: any irrelevant hit), the backend rewrites the question as a query and the baseline
searches again with the OTHER retriever (semantic <-> keyword); the answer then comes from
the relevant hits plus the new ones (each passage once). Otherwise it answers from the
relevant hits at once.
The episode's ``rewrite_triggered`` says whether the share was above the threshold (the
evaluation's trigger rate), ``crag_corrected`` whether a turn was left to search again.
The grades are notes of the turn (``[relevant: 1,3]``, ``[irrelevant: 2,4,5]``: 1-based ranks
in the first search), so the answer turn reads them back.

What the original does beyond this (a trained T5 evaluator, web search as the corrective
source, decompose-then-recompose of documents into strips) has no counterpart here: the
environment's other retriever stands in for web search.
"""

from __future__ import annotations

from grasp.baselines.backend import Backend
from grasp.baselines.base import OTHER_SEARCH, BaselinePolicy, Step, single_search_tool
from grasp.baselines.config import BaselineConfig, BaselineKind
from grasp.baselines.episode import EpisodeView, Passage, unique
from grasp.baselines.prompts import clean_query, grade_prompt, is_relevant, rewrite_prompt
from grasp.env.environment import EnvConfig


class CRAGPolicy(BaselinePolicy):
    """Search, grade the hits, and correct with a rewritten query on the other retriever."""

    kind = BaselineKind.CRAG

    def __init__(self, backend: Backend, config: BaselineConfig, env: EnvConfig) -> None:
        self.first_search = single_search_tool(config)
        self.corrective_search = OTHER_SEARCH[self.first_search]
        super().__init__(backend, config, env)

    def check_env(self, env: EnvConfig) -> None:
        self.require_tools(env, [self.first_search, self.corrective_search], turns=3)

    def step(self, view: EpisodeView) -> Step:
        if view.turn == 0:
            return self.search(self.first_search, view.question)
        first = view.turns[0].passages[: self.config.max_passages]
        if view.turn == 1:
            return (yield from self._grade(view, first))
        relevant = _ranks(view.notes.get("relevant", ""))
        kept = [p for rank, p in enumerate(first, start=1) if rank in relevant]
        corrective = [p for turn in view.turns[1:] for p in turn.passages]
        passages = unique(kept + corrective)[: self.config.max_passages]
        return (yield from self.answer(view, passages))

    def _grade(self, view: EpisodeView, passages: list[Passage]) -> Step:
        config = self.config
        replies = yield [
            grade_prompt(view.question, p, config.max_passage_chars, config.grade_tokens)
            for p in passages
        ]
        grades = [is_relevant(reply) for reply in replies]
        relevant = [rank for rank, good in enumerate(grades, start=1) if good]
        irrelevant = [rank for rank, good in enumerate(grades, start=1) if not good]
        share = len(irrelevant) / len(grades) if grades else 1.0
        notes = {"relevant": _list(relevant), "irrelevant": _list(irrelevant)}
        corrected = share > config.crag_threshold and view.turns_left > 1
        extra = {
            "crag_irrelevant_share": share,
            "crag_corrected": corrected,
            "rewrite_triggered": share > config.crag_threshold,
        }
        if not corrected:
            kept = [p for p, good in zip(passages, grades, strict=True) if good]
            return (yield from self.answer(view, kept, notes=notes, extra=extra))
        [reply] = yield [rewrite_prompt(view.question, config.rewrite_tokens)]
        query = clean_query(reply, self.env.max_query_chars)
        return self.search(
            self.corrective_search, query, fallback=view.question, notes=notes, extra=extra
        )


def _list(ranks: list[int]) -> str:
    return ",".join(str(r) for r in ranks) or "none"


def _ranks(text: str) -> set[int]:
    return {int(part) for part in text.split(",") if part.strip().isdigit()}
