"""The batched multi-turn rollout engine: B questions x G samples as concurrent episodes.

Each turn is a straight line: stop the episodes whose context is full (token_budget) or whose
time is up (wall_clock_budget, when ``max_episode_seconds`` is set); one generation call for every running episode; one ``env.step`` (which parses every turn and runs
each tool's calls as one batched call); the observations it returns are appended, as inserted
ids, to each episode's token trace. Repeat until every episode has stopped, and return the
finished episodes with their traces. The engine does not score them: its caller does, from
each episode's evidence (``batch.scored(reward)``, which calls ``grasp.reward.compute_reward``),
so that the reward is a hop of its own in training and evaluation alike.

    engine = RolloutEngine(env, policy, RolloutConfig(group_size=4), chat=chat_tokenizer)
    batch = engine.run(questions)
    trajectories = batch.scored(engine.config.reward)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from grasp.env.environment import Episode, RetrievalEnvironment
from grasp.reward import RewardConfig, compute_reward
from grasp.rollout.chat import ChatTokenizer, TokenTrace
from grasp.rollout.policy import (
    EPISODE_EXTRA,
    Generation,
    GenerationRequest,
    Policy,
    SamplingConfig,
)
from grasp.rollout.trajectory import Trajectory
from grasp.types import Question, StopReason, check_range


@dataclass
class RolloutConfig:
    """How many samples per question and how much each episode may generate."""

    group_size: int = 1
    """G: samples per question (GRPO's group)."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """Temperature, top-p, tokens per turn and seed."""
    max_context_tokens: int = 4096
    """Token budget of an episode (prompt + all turns); past it the episode stops."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Weights of the composite reward."""
    assistant_prefix: str = ""
    """Text the environment writes at the start of every assistant turn (mask 0), which the
    model continues, e.g. '<tool_call>\n{"name": "'. A format scaffold for tiny models; token-
    level policies only. Empty (no scaffold) for the paper's runs."""

    max_episode_seconds: float = 0.0
    """Wall-clock budget of an episode, in seconds from the start of its rollout; checked
    before each turn, so a turn that starts in time runs to its end. 0: no limit (the
    paper's runs). A hostile corpus or a slow backend must not hold an episode forever."""

    def __post_init__(self) -> None:
        check_range("rollout.max_episode_seconds", self.max_episode_seconds, low=0)
        # The sampling settings are checked here, where their place in the config is known
        # (a judge builds its own SamplingConfig from judge.max_new_tokens).
        check_range("rollout.group_size", self.group_size, low=1)
        check_range("rollout.max_context_tokens", self.max_context_tokens, low=1)
        check_range("rollout.sampling.max_new_tokens", self.sampling.max_new_tokens, low=1)
        check_range("rollout.sampling.temperature", self.sampling.temperature, low=0)

    def greedy(self) -> RolloutConfig:
        """These settings decoded greedily, one sample per question (how a policy is evaluated)."""
        sampling = replace(self.sampling, temperature=0.0, top_p=1.0, seed=0)
        return replace(self, sampling=sampling, group_size=1)


@dataclass
class RolloutTimings:
    """Wall-clock seconds of one rollout, split by who spent them."""

    generation: float = 0.0
    environment: float = 0.0
    """Parsing, searches, observation formatting and tokenization."""
    total: float = 0.0
    turns: int = 0
    """Turns of the slowest episode (number of generation calls)."""


Running = tuple[Episode, TokenTrace | None]
"""A running episode and its token trace (None without token bookkeeping)."""


@dataclass
class RolloutBatch:
    """What one ``RolloutEngine.run`` played: every episode, stopped, with its token trace."""

    episodes: list[Episode]
    """The B x G episodes, a question's G samples in a row."""
    traces: list[TokenTrace | None]
    """Each episode's token trace (None without token bookkeeping)."""
    timings: RolloutTimings

    def scored(self, reward: RewardConfig) -> list[Trajectory]:
        """The trajectories, each scored by ``compute_reward`` from its episode's evidence."""
        return [
            Trajectory.from_episode(episode, compute_reward(episode.evidence(), reward), trace)
            for episode, trace in zip(self.episodes, self.traces, strict=True)
        ]


class RolloutEngine:
    """Runs a policy in the environment, many episodes at once."""

    def __init__(
        self,
        env: RetrievalEnvironment,
        policy: Policy | None,
        config: RolloutConfig,
        chat: ChatTokenizer | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``chat`` enables token bookkeeping (needed for training); without it,
        episodes carry messages only (evaluation of chat-level policies). ``policy`` None:
        each ``run`` names its policy (training plays the trainer's current weights).
        ``clock`` (seconds) measures ``max_episode_seconds``; tests pass a fake one."""
        self.env = env
        self.policy = policy
        self.config = config
        self.chat = chat
        self.clock = clock
        self._seed = config.sampling.seed
        """The sampling seed of the run in progress (``run(seed=...)``)."""

    def run(
        self,
        questions: Sequence[Question],
        group_size: int | None = None,
        seed: int | None = None,
        policy: Policy | None = None,
    ) -> RolloutBatch:
        """Roll out ``group_size`` (default config.group_size) episodes per question.

        ``seed`` replaces ``config.sampling.seed`` for this run (training passes one per step,
        so that successive steps do not replay the same random stream); ``policy`` replaces
        the engine's own for this run."""
        policy = policy or self.policy
        if policy is None:
            raise ValueError("no policy: build the engine with one or pass run(policy=...)")
        started = time.perf_counter()
        self._seed = self.config.sampling.seed if seed is None else seed
        timings = RolloutTimings()
        g = group_size or self.config.group_size
        episodes = [
            self.env.reset(question, group_id=qi, sample_index=si)
            for qi, question in enumerate(questions)
            for si in range(g)
        ]
        traces = [self._new_trace(e) for e in episodes]
        # Every episode of a batch starts here (reset above), so one start time serves all.
        episodes_started = self.clock()
        while True:
            self._stop_full_contexts(episodes, traces)
            self._stop_late_episodes(episodes, episodes_started)
            turn = [(e, trace) for e, trace in zip(episodes, traces, strict=True) if not e.done]
            if not turn:
                break
            timings.turns += 1
            t0 = time.perf_counter()
            generations = self._generate(policy, turn, timings.turns)
            t1 = time.perf_counter()
            timings.generation += t1 - t0
            self._step(turn, generations)
            timings.environment += time.perf_counter() - t1
        timings.total = time.perf_counter() - started
        return RolloutBatch(episodes, traces, timings)

    # ------------------------------------------------------------------ one turn

    def _new_trace(self, episode: Episode) -> TokenTrace | None:
        if self.chat is None:
            return None
        return TokenTrace(prompt_ids=self.chat.prompt_ids(episode.messages))

    def _stop_full_contexts(
        self, episodes: Sequence[Episode], traces: Sequence[TokenTrace | None]
    ) -> None:
        """Stop (token_budget) every running episode whose context cannot fit one more token
        after the assistant prefix (which ``_generate`` inserts before the model writes)."""
        prefix = 0
        if self.config.assistant_prefix and self.chat is not None:
            prefix = len(self.chat.text_ids(self.config.assistant_prefix))
        for episode, trace in zip(episodes, traces, strict=True):
            if not episode.done and trace is not None:
                if trace.length + prefix >= self.config.max_context_tokens:
                    self.env.stop(episode, StopReason.TOKEN_BUDGET)

    def _stop_late_episodes(self, episodes: Sequence[Episode], started: float) -> None:
        """Stop (wall_clock_budget) every running episode past ``max_episode_seconds``."""
        budget = self.config.max_episode_seconds
        if budget <= 0 or self.clock() - started < budget:
            return
        for episode in episodes:
            self.env.stop(episode, StopReason.WALL_CLOCK_BUDGET)

    def _generate(
        self, policy: Policy, turn: Sequence[Running], turn_number: int
    ) -> list[Generation]:
        """One generation call for every running episode, after the assistant prefix."""
        if self.config.assistant_prefix and self.chat is not None:
            prefix_ids = self.chat.text_ids(self.config.assistant_prefix)
            for _, trace in turn:
                if trace is not None:
                    trace.add_inserted(prefix_ids)
        requests = [self._request(episode, trace) for episode, trace in turn]
        generations = policy.generate(requests, self._turn_sampling(turn_number))
        if len(generations) != len(requests):
            raise RuntimeError(
                f"policy returned {len(generations)} generations for {len(requests)} requests"
            )
        return list(generations)

    def _request(self, episode: Episode, trace: TokenTrace | None) -> GenerationRequest:
        budget = self.config.sampling.max_new_tokens
        if trace is not None:
            budget = min(budget, self.config.max_context_tokens - trace.length)
        return GenerationRequest(
            messages=list(episode.messages),
            token_ids=trace.context_ids if trace is not None else None,
            max_new_tokens=budget,
            request_id=episode.episode_id,
        )

    def _turn_sampling(self, turn: int) -> SamplingConfig:
        # A distinct seed per turn: the same seed each turn would correlate the samples.
        base = self.config.sampling
        return SamplingConfig(base.temperature, base.top_p, base.max_new_tokens, self._seed + turn)

    def _step(self, turn: Sequence[Running], generations: Sequence[Generation]) -> None:
        """Record each generation, step the environment once, append each observation.

        A generation error stops its episode (generation_error) before the step; the others
        are stepped together, and an episode the step did not end gets its observation's ids.
        """
        stepping: list[tuple[Episode, TokenTrace | None, Generation]] = []
        for (episode, trace), generation in zip(turn, generations, strict=True):
            episode.extra.update(generation.extra.get(EPISODE_EXTRA, {}))
            if generation.error is not None:
                episode.extra["generation_error"] = generation.error  # what the backend said
                self.env.stop(episode, StopReason.GENERATION_ERROR)
                continue
            if trace is not None:
                self._record_generation(trace, generation)
            stepping.append((episode, trace, generation))
        if not stepping:
            return
        prefix = self.config.assistant_prefix if self.chat is not None else ""
        observations = self.env.step(
            [episode for episode, _, _ in stepping],
            [prefix + generation.text for _, _, generation in stepping],
        )
        for (_, trace, generation), observation in zip(stepping, observations, strict=True):
            if trace is not None and observation is not None:
                self._record_observation(trace, generation, observation)

    def _record_generation(self, trace: TokenTrace, generation: Generation) -> None:
        assert self.chat is not None
        if generation.token_ids is not None:
            trace.add_generated(generation.token_ids, generation.logprobs)
            return
        # Chat-level policy: its text stands for what it generated, end of turn included.
        ids = self.chat.text_ids(generation.text) + [self.chat.end_of_turn_id]
        trace.add_generated(ids, None)

    def _record_observation(
        self, trace: TokenTrace, generation: Generation, observation: str
    ) -> None:
        """Append the tool turn (mask 0), closing the model's turn first if it ran out of tokens."""
        assert self.chat is not None
        if not _ended_turn(generation, self.chat.end_of_turn_id):
            trace.add_inserted([self.chat.end_of_turn_id])
        trace.add_inserted(self.chat.tool_turn_ids(observation))


def _ended_turn(generation: Generation, end_of_turn_id: int) -> bool:
    if generation.token_ids is None:
        return True  # text-only generations were closed in _record_generation
    return bool(generation.token_ids) and generation.token_ids[-1] == end_of_turn_id
