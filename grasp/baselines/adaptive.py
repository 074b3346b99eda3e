"""Adaptive-RAG: route each question to no retrieval, single-step or multi-step retrieval
(Jeong et al., 2024).

Turn 1 routes: the backend answers ``adaptive.route_prompt`` (A: none, B: single, C: multi),
or, with ``adaptive.route_by=length``, the question's word count decides (at most
``none_max_words``: none; at least ``multi_min_words``: multi; else single). The route is a
note of the turn (``[route: multi]``) and goes into the trajectory's ``extra.route``; that
turn and every later one are then those of the routed baseline: direct answer, single-step
(``baseline.search``, no reranker) or IRCoT.

The original trains a T5 classifier on labels derived from which strategy answered each
question; ``route_by=backend`` replaces it with the prompted backend.
"""

from __future__ import annotations

from collections.abc import Generator

from grasp.baselines.backend import Backend
from grasp.baselines.base import BaselinePolicy
from grasp.baselines.config import BaselineConfig, BaselineKind, Route, RouteBy
from grasp.baselines.direct import DirectAnswerPolicy
from grasp.baselines.ircot import IRCoTPolicy
from grasp.baselines.prompts import Prompt, read_route_letter, route_prompt
from grasp.baselines.routing import RoutedPolicy
from grasp.baselines.single_step import SingleStepPolicy
from grasp.env.environment import EnvConfig

_LETTERS = {"A": Route.NONE, "B": Route.SINGLE, "C": Route.MULTI}


class AdaptivePolicy(RoutedPolicy):
    """Classify the question's complexity, then act as the baseline for that class."""

    route_type = Route
    kind = BaselineKind.ADAPTIVE

    def __init__(self, backend: Backend, config: BaselineConfig, env: EnvConfig) -> None:
        if "{question}" not in config.adaptive.route_prompt:
            raise ValueError("baseline.adaptive.route_prompt must contain {question}")
        if config.adaptive.none_max_words >= config.adaptive.multi_min_words:
            raise ValueError(
                "baseline.adaptive.none_max_words must be below multi_min_words, got "
                f"{config.adaptive.none_max_words} >= {config.adaptive.multi_min_words}"
            )
        self.routes: dict[Route, BaselinePolicy] = {
            Route.NONE: DirectAnswerPolicy(backend, config, env),
            Route.SINGLE: SingleStepPolicy(backend, config, env),
            Route.MULTI: IRCoTPolicy(backend, config, env),
        }
        super().__init__(backend, config, env)

    def _route(self, question: str) -> Generator[list[Prompt], list[str], Route]:
        settings = self.config.adaptive
        if settings.route_by is RouteBy.LENGTH:
            words = len(question.split())
            if words <= settings.none_max_words:
                return Route.NONE
            return Route.MULTI if words >= settings.multi_min_words else Route.SINGLE
        [reply] = yield [route_prompt(settings.route_prompt, question, self.config.route_tokens)]
        letter = read_route_letter(reply)
        return _LETTERS[letter] if letter else Route(settings.fallback_route)
