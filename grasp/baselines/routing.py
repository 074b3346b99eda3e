"""Router baselines: decide a route once per episode, then let that route's policy act.

Adaptive-RAG (``adaptive.py``: by question complexity) and Adaptive-RAG over Self-RAG
(``adaptive_self_rag.py``: corpus or no retrieval, from what the index holds) differ only in
how they decide. The route decided on the first turn is kept in the episode's notes, so that
every later turn (a rewrite, a second search) goes to the same route.
"""

from __future__ import annotations

from collections.abc import Generator
from enum import StrEnum

from grasp.baselines.base import Action, BaselinePolicy, Step
from grasp.baselines.episode import EpisodeView
from grasp.baselines.prompts import Prompt
from grasp.env.environment import EnvConfig


class RoutedPolicy(BaselinePolicy):
    """A policy that routes each episode to one of ``routes`` (set before ``__init__``)."""

    route_type: type[StrEnum]
    """The enum of the routes, to read the route back from the episode's notes."""
    routes: dict[StrEnum, BaselinePolicy]

    def check_env(self, env: EnvConfig) -> None:
        """Nothing of its own: each route checked the environment when it was built."""

    def step(self, view: EpisodeView) -> Step:
        noted = view.notes.get("route")
        route = (yield from self._route(view.question)) if noted is None else self.route_type(noted)
        action: Action = yield from self.routes[route].step(view)
        if noted is None:
            action.notes["route"] = str(route)
        action.extra["route"] = str(route)
        return action

    def _route(self, question: str) -> Generator[list[Prompt], list[str], StrEnum]:
        """The route of a question, decided on the episode's first turn."""
        raise NotImplementedError
