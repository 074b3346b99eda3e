"""Direct answer: the backend answers from the question alone, with no retrieval.

One turn: ``answer(...)``. Recall is 0 by construction; EM/F1 measure what the backend knows.
"""

from __future__ import annotations

from grasp.baselines.base import BaselinePolicy, Step
from grasp.baselines.config import BaselineKind
from grasp.baselines.episode import EpisodeView
from grasp.env.environment import EnvConfig
from grasp.types import ToolName


class DirectAnswerPolicy(BaselinePolicy):
    """Answer at once, from the question only."""

    kind = BaselineKind.DIRECT

    def check_env(self, env: EnvConfig) -> None:
        self.require_tools(env, [ToolName.ANSWER], turns=1)

    def step(self, view: EpisodeView) -> Step:
        return (yield from self.answer(view, []))
