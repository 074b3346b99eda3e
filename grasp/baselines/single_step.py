"""Single-step retrieval: search once with the question, optionally rerank, then answer.

Turns: one search (``semantic`` or ``lexical``), or for ``hybrid`` both searches with the
question, then ``answer``. The environment has no fused search tool, so hybrid issues the two
searches (both recorded, in D_s and D_k) and fuses their hits here by reciprocal rank, as
``CorpusIndex.search(Retriever.HYBRID)`` does, but over the env.top_k hits of each list.

With a reranker, the env.top_k hits (set env.top_k to the candidate count K') are rescored by
a cross-encoder against the question and the best ``context_k`` reach the backend. Recall in
the results counts every hit the episode saw (all K'); ``extra.context_paragraph_ids`` holds
the paragraphs the backend answered from.

Sentence tools (read_paragraph offered) give sentence hits; without read_paragraph the
environment returns whole paragraphs (paragraph granularity).
"""

from __future__ import annotations

from collections.abc import Sequence

from grasp.baselines.backend import Backend
from grasp.baselines.base import SEARCH_TOOL, BaselinePolicy, Step
from grasp.baselines.config import BaselineConfig, BaselineKind, SearchMode
from grasp.baselines.episode import EpisodeView, Passage
from grasp.baselines.rerank import Reranker
from grasp.corpus.index import RRF_K
from grasp.env.environment import EnvConfig
from grasp.types import ToolName


class SingleStepPolicy(BaselinePolicy):
    """Search with the question (one or both retrievers), rerank if configured, answer."""

    kind = BaselineKind.SINGLE_STEP

    def __init__(
        self,
        backend: Backend,
        config: BaselineConfig,
        env: EnvConfig,
        reranker: Reranker | None = None,
    ) -> None:
        if config.search is SearchMode.HYBRID:
            self.searches = [ToolName.SEMANTIC_SEARCH, ToolName.KEYWORD_SEARCH]
        else:
            self.searches = [SEARCH_TOOL[SearchMode(config.search)]]
        self.reranker = reranker
        super().__init__(backend, config, env)

    def check_env(self, env: EnvConfig) -> None:
        self.require_tools(env, self.searches, turns=len(self.searches) + 1)

    def step(self, view: EpisodeView) -> Step:
        if view.turn < len(self.searches) and view.turns_left > 1:
            return self.search(self.searches[view.turn], view.question)
        lists = [turn.passages for turn in view.turns[: len(self.searches)]]
        candidates = fuse(lists) if len(lists) > 1 else (lists[0] if lists else [])
        k = self.config.context_k
        if self.reranker is not None:
            passages = self.reranker.rerank(view.question, candidates, k)
        else:
            passages = candidates[:k]
        return (yield from self.answer(view, passages))


def fuse(lists: Sequence[Sequence[Passage]]) -> list[Passage]:
    """Reciprocal-rank fusion: score = sum over lists of 1 / (60 + rank); ties keep first-seen
    order. A passage found by both lists appears once (its first occurrence)."""
    scores: dict[tuple[int, int | None], float] = {}
    first: dict[tuple[int, int | None], Passage] = {}
    for passages in lists:
        for rank, passage in enumerate(passages):
            scores[passage.key] = scores.get(passage.key, 0.0) + 1.0 / (RRF_K + rank + 1)
            first.setdefault(passage.key, passage)
    order = sorted(first, key=lambda key: -scores[key])  # stable: ties keep first-seen order
    return [first[key] for key in order]
