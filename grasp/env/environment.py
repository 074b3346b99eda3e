"""The retrieval environment: episodes, their state machine, and batched tool execution.

One ``Episode`` per (question, sample). Each turn the rollout hands the environment the
generated text of every active episode at once; ``step`` parses each turn (the parser never
raises), groups the valid calls by tool, runs each group as ONE batched search, and returns
the observations. It records what the reward needs: paragraphs hit by semantic search (D_s),
by keyword search (D_k), and read (D_r), plus every call and its cost.

Episode states: PENDING (reset, not yet generated) -> GENERATING (policy's turn) ->
PROCESSING_TOOLS (environment's turn) -> GENERATING ... -> TERMINATED with a StopReason.

The tool set is configuration. Without read_paragraph, searches return whole paragraphs
(paragraph granularity, the paper's ablation) and every returned paragraph counts as read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grasp.corpus.corpus import SentenceCorpus
from grasp.corpus.index import SearchIndex
from grasp.env import observations
from grasp.env.parser import ParsedTurn, ParseErrorKind, ToolCall, parse_turn
from grasp.env.tool_specs import tool_schema, tool_specs
from grasp.types import (
    EpisodeEvidence,
    Granularity,
    Hit,
    Question,
    Retriever,
    StopReason,
    StrEnum,
    ToolName,
    check_range,
    parse_enum,
)

SEARCH_TOOLS = (ToolName.SEMANTIC_SEARCH, ToolName.KEYWORD_SEARCH, ToolName.SEARCH)

PARAGRAPH_DESCRIPTIONS = {
    ToolName.SEMANTIC_SEARCH: "Search the corpus for whole paragraphs whose meaning is closest "
    "to the query. Good for paraphrased or descriptive questions.",
    ToolName.KEYWORD_SEARCH: "Search the corpus for whole paragraphs that share the most words "
    "with the query (BM25). Good for exact names, titles, dates and rare terms.",
}
"""Search descriptions when read_paragraph is absent and searches return paragraphs."""


class EpisodeStatus(StrEnum):
    PENDING = "pending"
    GENERATING = "generating"
    PROCESSING_TOOLS = "processing_tools"
    TERMINATED = "terminated"


class SearchScope(StrEnum):
    POOLED = "pooled"
    """Search the whole pooled corpus of the split (GRASP's setting)."""
    QUESTION = "question"
    """Search only the question's own paragraphs (per-question distractor setting)."""


class FinalMessagePolicy(StrEnum):
    ANSWER = "answer"
    """A turn without a tool call is taken as the final answer (stop reason no_tool_call)."""
    ERROR = "error"
    """A turn without a tool call is an error observation and costs a turn."""


@dataclass
class EnvConfig:
    """The tools, budgets and rules of an episode."""

    tools: list[str] = field(
        default_factory=lambda: [
            "semantic_search",
            "keyword_search",
            "read_paragraph",
            "answer",
        ]
    )
    """Tools offered; ablations drop read_paragraph, semantic_search or keyword_search."""
    top_k: int = 5
    """Hits per search (the paper's K)."""
    turn_budget: int = 6
    """T: tool calls an episode may make, the answer included; shown to the policy."""
    scope: str = "pooled"
    """pooled corpus, or each question's own paragraphs."""
    final_message: str = "answer"
    """What a turn without a tool call means."""
    read_requires_retrieved: bool = True
    """read_paragraph accepts only ids shown earlier in the episode (the paper's expansion)."""
    max_query_chars: int = 512
    """Longer queries are rejected with an error observation."""
    max_observation_chars: int = 2000
    """Each hit or paragraph text is cut to this many characters."""
    demonstration: bool = False
    """Show one worked example episode before the question (a scaffold for tiny models)."""
    schemas_in_prompt: bool = True
    """Render the tools' JSON schemas through the chat template (about 600 tokens); when
    false, the system prompt lists the tools in one line each (for short CPU contexts)."""

    def __post_init__(self) -> None:
        # Enum-valued fields are typed str for Hydra (which matches enums by member name);
        # they become enums here, with an error that names the field.
        self.tools = [parse_enum(ToolName, t, "env.tools") for t in self.tools]
        self.scope = parse_enum(SearchScope, self.scope, "env.scope")
        self.final_message = parse_enum(FinalMessagePolicy, self.final_message, "env.final_message")

    @property
    def granularity(self) -> Granularity:
        """Sentence hits when the policy can expand them, whole paragraphs otherwise."""
        if ToolName.READ_PARAGRAPH in self.tools:
            return Granularity.SENTENCE
        return Granularity.PARAGRAPH

    def validate(self) -> None:
        """Raise ValueError naming the field when the configuration cannot work."""
        if ToolName.ANSWER not in self.tools:
            raise ValueError("env.tools must include answer")
        if not any(t in self.tools for t in SEARCH_TOOLS):
            raise ValueError(
                "env.tools has no search tool: add semantic_search, keyword_search or search"
            )
        if len(set(self.tools)) != len(self.tools):
            raise ValueError(f"env.tools lists a tool twice: {self.tools}")
        # max_query_chars=0 would refuse every search; max_observation_chars<1 shows no text.
        for name in ("top_k", "turn_budget", "max_query_chars", "max_observation_chars"):
            check_range(f"env.{name}", getattr(self, name), low=1)


def check_top_k(config: EnvConfig, questions: Sequence[Question]) -> None:
    """Refuse an ``env.top_k`` beyond the units of the index ``questions`` pool into.

    Called before that index is built, so that the error comes first, not after the build
    (RetrievalEnvironment checks it again against the index it is given).
    """
    units = SentenceCorpus.from_questions(questions).num_units(config.granularity)
    if config.top_k > units:
        raise ValueError(
            f"env.top_k={config.top_k} exceeds the {config.granularity}s in the corpus ({units})"
        )


@dataclass
class TurnRecord:
    """One turn of an episode: what the policy wrote and what the environment answered."""

    text: str
    call: dict[str, Any] | None = None
    """{"name": ..., "arguments": {...}} of a valid call."""
    error: str | None = None
    """ParseErrorKind value, or "invalid_call" for a well-formed call the environment refused."""
    observation: str | None = None
    hits: list[dict[str, Any]] = field(default_factory=list)
    """Provenance of each hit: sentence_id, paragraph_id, score."""


@dataclass
class Episode:
    """The state of one episode; the environment mutates it, the reward reads its evidence."""

    episode_id: str
    question: Question
    group_id: int
    """Index of the question in its batch: the G samples of a question share it."""
    sample_index: int
    messages: list[dict[str, Any]]
    turn_budget: int
    gold_paragraph_ids: frozenset[int]
    scope: np.ndarray | None
    status: EpisodeStatus = EpisodeStatus.PENDING
    stop_reason: StopReason | None = None
    answer: str | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    semantic_paragraph_ids: set[int] = field(default_factory=set)
    keyword_paragraph_ids: set[int] = field(default_factory=set)
    read_paragraph_ids: set[int] = field(default_factory=set)
    shown_sentence_ids: set[int] = field(default_factory=set)
    shown_paragraph_ids: set[int] = field(default_factory=set)
    tool_calls: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    extra: dict[str, Any] = field(default_factory=dict)
    """What the policy reported about the episode (a baseline's route...), for the trajectory."""

    @property
    def turns_used(self) -> int:
        return len(self.turns)

    @property
    def turns_left(self) -> int:
        return self.turn_budget - self.turns_used

    @property
    def done(self) -> bool:
        return self.status is EpisodeStatus.TERMINATED

    def terminate(self, reason: StopReason) -> None:
        self.status = EpisodeStatus.TERMINATED
        self.stop_reason = reason

    def evidence(self) -> EpisodeEvidence:
        """What the reward and retrieval metrics need from this episode."""
        return EpisodeEvidence(
            answer=self.answer,
            gold_answers=self.question.answers,
            gold_paragraph_ids=self.gold_paragraph_ids,
            semantic_paragraph_ids=frozenset(self.semantic_paragraph_ids),
            keyword_paragraph_ids=frozenset(self.keyword_paragraph_ids),
            read_paragraph_ids=frozenset(self.read_paragraph_ids),
            turns_used=self.turns_used,
            turn_budget=self.turn_budget,
            invalid_turns=sum(1 for turn in self.turns if turn.error is not None),
        )


class RetrievalEnvironment:
    """Runs the tools of many episodes against one index, batching searches per tool."""

    def __init__(self, index: SearchIndex, config: EnvConfig) -> None:
        config.validate()
        if config.top_k > index.corpus.num_units(config.granularity):
            raise ValueError(
                f"env.top_k={config.top_k} exceeds the {config.granularity}s in the corpus "
                f"({index.corpus.num_units(config.granularity)})"
            )
        self.index = index
        self.config = config
        self.specs = tool_specs(config.tools)
        self.tool_schemas = [self._schema(t) for t in config.tools]
        self.system_prompt = observations.system_prompt([str(t) for t in config.tools])
        if not config.schemas_in_prompt:
            self.system_prompt += "\n\n" + observations.compact_tool_list(config.tools)

    def _schema(self, tool: ToolName) -> dict:
        """A tool's schema; at paragraph granularity the searches say they return paragraphs."""
        schema = tool_schema(tool)
        if self.config.granularity is Granularity.PARAGRAPH and tool in PARAGRAPH_DESCRIPTIONS:
            schema["function"]["description"] = PARAGRAPH_DESCRIPTIONS[tool]
            schema["function"].setdefault("return", {})["description"] = (
                "The top-K paragraphs, each with its paragraph id, title and full text."
            )
        return schema

    @property
    def prompt_tool_schemas(self) -> list[dict]:
        """The schemas the chat template renders (none when the prompt lists tools itself)."""
        return self.tool_schemas if self.config.schemas_in_prompt else []

    def reset(self, question: Question, group_id: int = 0, sample_index: int = 0) -> Episode:
        """A new episode for ``question``: the system and user messages, nothing else yet."""
        corpus = self.index.corpus
        scope = None
        if self.config.scope is SearchScope.QUESTION:
            scope = corpus.question_scope(question.question_id)
        messages = [{"role": "system", "content": self.system_prompt}]
        if self.config.demonstration:
            messages += observations.demonstration(self.config.tools, self.config.turn_budget)
        messages.append(
            {
                "role": "user",
                "content": observations.user_prompt(question.question, self.config.turn_budget),
            }
        )
        return Episode(
            episode_id=f"{question.question_id}#{sample_index}",
            question=question,
            group_id=group_id,
            sample_index=sample_index,
            messages=messages,
            turn_budget=self.config.turn_budget,
            gold_paragraph_ids=corpus.gold_paragraph_ids(question),
            scope=scope,
            status=EpisodeStatus.GENERATING,
        )

    def step(self, episodes: Sequence[Episode], texts: Sequence[str]) -> list[str | None]:
        """Apply one generated turn to each episode; return each one's observation.

        The observation is None for an episode that terminated this turn. Every turn costs
        one unit of the budget, valid or not; an episode out of turns stops with turn_budget.
        """
        if len(episodes) != len(texts):
            raise ValueError(f"{len(texts)} texts for {len(episodes)} episodes")
        for episode in episodes:
            if episode.status is not EpisodeStatus.GENERATING:
                raise ValueError(
                    f"episode {episode.episode_id} is {episode.status}, not generating"
                )
        parsed = [parse_turn(text, self.specs, self.config.max_query_chars) for text in texts]
        results: list[str | None] = [None] * len(episodes)
        searches: dict[ToolName, list[int]] = {}
        for i, (episode, text, turn) in enumerate(zip(episodes, texts, parsed, strict=True)):
            episode.status = EpisodeStatus.PROCESSING_TOOLS
            episode.messages.append({"role": "assistant", "content": text})
            episode.turns.append(TurnRecord(text=text))
            if turn.call is not None and turn.call.name in SEARCH_TOOLS:
                searches.setdefault(turn.call.name, []).append(i)
            else:
                results[i] = self._apply_local(episode, turn)
        for tool, members in searches.items():
            calls = [parsed[i].call for i in members]
            observed = self._run_search(tool, [episodes[i] for i in members], calls)
            for i, observation in zip(members, observed, strict=True):
                results[i] = observation
        for episode, observation in zip(episodes, results, strict=True):
            self._finish_turn(episode, observation)
        return [None if e.done else e.messages[-1]["content"] for e in episodes]

    # ------------------------------------------------------------------ tools

    def _apply_local(self, episode: Episode, turn: ParsedTurn) -> str | None:
        """Handle everything but searches: parse errors, answers and reads."""
        record = episode.turns[-1]
        if turn.error is not None:
            kind = turn.error.kind
            if kind is ParseErrorKind.NO_TOOL_CALL and (
                self.config.final_message is FinalMessagePolicy.ANSWER
            ):
                episode.answer = turn.reasoning
                episode.terminate(StopReason.NO_TOOL_CALL)
                return None
            record.error = kind.value
            episode.errors[kind.value] += 1
            return observations.format_error(turn.error.message, self.config.max_observation_chars)
        call = turn.call
        assert call is not None  # ParsedTurn holds exactly one of call and error
        record.call = {"name": call.name.value, "arguments": dict(call.arguments)}
        episode.tool_calls[call.name.value] += 1
        if call.name is ToolName.ANSWER:
            episode.answer = call.arguments["answer"]
            episode.terminate(StopReason.ANSWERED)
            return None
        return self._read(episode, call)

    def _read(self, episode: Episode, call: ToolCall) -> str:
        corpus = self.index.corpus
        sentence_id = call.arguments.get("sentence_id")
        paragraph_id = call.arguments.get("paragraph_id")
        if sentence_id is not None:
            if not corpus.has_sentence(sentence_id):
                return self._refuse(episode, f"sentence s{sentence_id} does not exist.")
            if (
                self.config.read_requires_retrieved
                and sentence_id not in episode.shown_sentence_ids
            ):
                return self._refuse(
                    episode, f"sentence s{sentence_id} was not in your search results."
                )
            paragraph_id = corpus.paragraph_of(sentence_id)
        elif not corpus.has_paragraph(paragraph_id):
            return self._refuse(episode, f"paragraph p{paragraph_id} does not exist.")
        elif (
            self.config.read_requires_retrieved and paragraph_id not in episode.shown_paragraph_ids
        ):
            return self._refuse(
                episode, f"paragraph p{paragraph_id} was not in your search results."
            )
        episode.read_paragraph_ids.add(paragraph_id)
        ids = corpus.sentence_ids(paragraph_id)
        episode.shown_sentence_ids.update(ids)
        return observations.format_paragraph(
            paragraph_id,
            corpus.title(paragraph_id),
            corpus.paragraph_sentences(paragraph_id),
            ids.start,
            self.config.max_observation_chars,
        )

    def _refuse(self, episode: Episode, problem: str) -> str:
        episode.turns[-1].error = "invalid_call"
        episode.errors["invalid_call"] += 1
        return observations.format_error(
            f"{problem} Read a sentence or paragraph id from a search result.",
            self.config.max_observation_chars,
        )

    def _run_search(
        self, tool: ToolName, episodes: Sequence[Episode], calls: Sequence[ToolCall]
    ) -> list[str]:
        """One batched search for every episode that called ``tool`` this turn."""
        retriever = Retriever.BM25 if tool is ToolName.KEYWORD_SEARCH else Retriever.DENSE
        granularity = Granularity.PARAGRAPH if tool is ToolName.SEARCH else self.config.granularity
        queries = [call.arguments["query"] for call in calls]
        scopes = None
        if self.config.scope is SearchScope.QUESTION:
            scopes = [episode.scope for episode in episodes]
        hit_lists = self.index.search(
            queries, retriever, k=self.config.top_k, granularity=granularity, scopes=scopes
        )
        observed = []
        for episode, call, hits, query in zip(episodes, calls, hit_lists, queries, strict=True):
            record = episode.turns[-1]
            record.call = {"name": tool.value, "arguments": dict(call.arguments)}
            episode.tool_calls[tool.value] += 1
            self._record_hits(episode, tool, hits, granularity)
            record.hits = [
                {"sentence_id": h.sentence_id, "paragraph_id": h.paragraph_id, "score": h.score}
                for h in hits
            ]
            observed.append(
                observations.format_hits(tool, query, hits, self.config.max_observation_chars)
            )
        return observed

    def _record_hits(
        self, episode: Episode, tool: ToolName, hits: Sequence[Hit], granularity: Granularity
    ) -> None:
        paragraph_ids = {hit.paragraph_id for hit in hits}
        if tool is ToolName.KEYWORD_SEARCH:
            episode.keyword_paragraph_ids |= paragraph_ids
        else:
            episode.semantic_paragraph_ids |= paragraph_ids
        episode.shown_paragraph_ids |= paragraph_ids
        episode.shown_sentence_ids.update(h.sentence_id for h in hits if h.sentence_id is not None)
        if granularity is Granularity.PARAGRAPH:
            # A whole paragraph in the results has been read: R_R stays meaningful in the
            # paragraph-granularity ablation, which has no read_paragraph tool.
            episode.read_paragraph_ids |= paragraph_ids

    def _finish_turn(self, episode: Episode, observation: str | None) -> None:
        if episode.done:
            return
        if episode.turns_left <= 0:
            episode.turns[-1].observation = observation
            episode.terminate(StopReason.TURN_BUDGET)
            return
        text = f"{observation}\n{observations.turns_left_line(episode.turns_left)}"
        episode.turns[-1].observation = text
        episode.messages.append({"role": "tool", "content": text})
        episode.status = EpisodeStatus.GENERATING

    def stop(self, episode: Episode, reason: StopReason) -> None:
        """End an episode from outside (token budget exhausted, generation error)."""
        if not episode.done:
            episode.terminate(reason)
