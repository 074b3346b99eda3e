"""Adaptive-RAG as a router over what the index holds, then Self-RAG for the corpus route.

Turn 1 routes before any retrieval: the backend answers ``baseline.index_router.route_prompt``
(A: search the corpus, B: answer without retrieval), whose ``{index_summary}`` is
``index_summary(corpus)``: the index's size and a sample of its own titles, so the router's
idea of the corpus cannot drift from the index it routes to. The route is a note of the first
turn (``[route: corpus]``) and every later turn reads it back instead of asking again, so a
rewrite never sends the question to a source the router rejected; each turn's extra carries
``route``. The corpus route then takes every turn of ``SelfRAGPolicy`` (grades, trigger,
rewrites, groundedness and answer checks); the none route answers from the question alone.

Today's complexity router (Jeong et al., 2024: none, single-step or IRCoT) is
``baseline=adaptive`` (grasp/baselines/adaptive.py).

    summary = index_summary(index.corpus, titles=20)
    policy = AdaptiveSelfRAGPolicy(backend, config, env, index_summary=summary)
"""

from __future__ import annotations

from collections.abc import Generator

import numpy as np
import pyarrow.compute as pc

from grasp.baselines.backend import Backend
from grasp.baselines.base import BaselinePolicy
from grasp.baselines.config import BaselineConfig, BaselineKind, SourceRoute
from grasp.baselines.direct import DirectAnswerPolicy
from grasp.baselines.prompts import Prompt, read_route_letter, route_prompt
from grasp.baselines.routing import RoutedPolicy
from grasp.baselines.self_rag import SelfRAGPolicy
from grasp.corpus.corpus import SentenceCorpus
from grasp.env.environment import EnvConfig

_LETTERS = {"A": SourceRoute.CORPUS, "B": SourceRoute.NONE}


def index_summary(corpus: SentenceCorpus, titles: int) -> str:
    """What the index holds, in a few lines: its paragraph and title counts and ``titles``
    of its titles, taken evenly spaced over the paragraph ids (the same corpus always gives
    the same summary)."""
    count = corpus.num_paragraphs
    if count == 0:
        return "The index is empty."
    distinct = pc.count_distinct(corpus.paragraph_title).as_py()
    positions = np.unique(np.linspace(0, count - 1, num=min(titles, count)).round().astype(int))
    sample = list(dict.fromkeys(corpus.title(int(p)) for p in positions))
    return (
        f"{count} paragraphs ({corpus.num_sentences} sentences) under {distinct} titles, "
        "among them: " + "; ".join(sample) + "."
    )


class AdaptiveSelfRAGPolicy(RoutedPolicy):
    """Route the question to the corpus or to no retrieval, then act as that route's baseline."""

    route_type = SourceRoute
    kind = BaselineKind.ADAPTIVE_SELF_RAG

    def __init__(
        self, backend: Backend, config: BaselineConfig, env: EnvConfig, index_summary: str
    ) -> None:
        template = config.index_router.route_prompt
        missing = [key for key in ("{question}", "{index_summary}") if key not in template]
        if missing:
            raise ValueError(f"baseline.index_router.route_prompt must contain {missing}")
        self.index_summary = index_summary
        self.routes: dict[SourceRoute, BaselinePolicy] = {
            SourceRoute.CORPUS: SelfRAGPolicy(backend, config, env),
            SourceRoute.NONE: DirectAnswerPolicy(backend, config, env),
        }
        super().__init__(backend, config, env)

    def _route(self, question: str) -> Generator[list[Prompt], list[str], SourceRoute]:
        settings = self.config.index_router
        prompt = route_prompt(
            settings.route_prompt, question, self.config.route_tokens, self.index_summary
        )
        [reply] = yield [prompt]
        letter = read_route_letter(reply)
        return _LETTERS.get(letter or "", SourceRoute(settings.fallback_route))
