"""IRCoT: interleave retrieval with chain-of-thought (Trivedi et al., 2023).

Turn 1 searches with the question. Each later turn, the backend writes the next sentence of
reasoning from the question, the passages so far (the first ``max_passages``) and its
earlier sentences. A sentence saying "So the answer is:" (or "The answer is:", as small models
write it) ends the episode with that answer; any other sentence becomes the next search query.
When one turn is left, the backend answers from the passages and the reasoning so far, so the
turn budget caps the loop.

The sentences are the reasoning text of each turn (before its tool call), so the chain lives
in the conversation and in the trajectory.
"""

from __future__ import annotations

from grasp.baselines.backend import Backend
from grasp.baselines.base import Action, BaselinePolicy, Step, single_search_tool
from grasp.baselines.config import BaselineConfig, BaselineKind
from grasp.baselines.episode import EpisodeView
from grasp.baselines.prompts import read_reasoning, reason_prompt
from grasp.env.environment import EnvConfig
from grasp.types import ToolName


class IRCoTPolicy(BaselinePolicy):
    """Retrieve, reason one sentence, retrieve with it, ... until an answer or the budget."""

    kind = BaselineKind.IRCOT

    def __init__(self, backend: Backend, config: BaselineConfig, env: EnvConfig) -> None:
        self.search_tool = single_search_tool(config)
        super().__init__(backend, config, env)

    def check_env(self, env: EnvConfig) -> None:
        self.require_tools(env, [self.search_tool], turns=2)

    def step(self, view: EpisodeView) -> Step:
        if view.turn == 0:
            return self.search(self.search_tool, view.question)
        passages = view.passages(self.config.max_passages)
        chain = view.thoughts
        if view.turns_left <= 1:
            return (yield from self.answer(view, passages, reasoning=chain))
        prompt = reason_prompt(
            view.question,
            passages,
            chain,
            self.config.max_passage_chars,
            self.config.reasoning_tokens,
        )
        [reply] = yield [prompt]
        reasoning = read_reasoning(reply)
        context = sorted({p.paragraph_id for p in passages})
        if reasoning.answer is not None:
            return Action(
                ToolName.ANSWER,
                {"answer": reasoning.answer},
                reasoning=reasoning.sentence,
                extra={"context_paragraph_ids": context},
            )
        return self.search(
            self.search_tool,
            reasoning.sentence,
            fallback=view.question,
            reasoning=reasoning.sentence,
        )
