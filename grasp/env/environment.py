"""The retrieval environment: episodes, their state machine, and tool dispatch.

One ``Episode`` (``grasp.env.episode``) per (question, sample). Each turn the rollout hands the
environment the generated text of every active episode at once; ``step`` parses each turn (the
parser never raises), groups the valid calls by tool, hands each group to its tool object
(``grasp.env.tools``: a search is ONE batched index query), and returns the observations. The
tools record what the reward needs, each under its evidence kind: paragraphs hit by semantic
search (D_s), by keyword search (D_k), and read (D_r); the environment records every call,
every error and the turn counter.

The tool set is configuration: any registered tool (``grasp.env.tools.TOOLS``) may be offered,
and the default set is the tools registered as default. Without a read tool (read_paragraph),
searches return whole paragraphs (paragraph granularity, the paper's ablation) and every
returned paragraph counts as read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from grasp.corpus.corpus import SentenceCorpus
from grasp.corpus.index import SearchIndex
from grasp.env import observations
from grasp.env.demonstration import demonstration
from grasp.env.episode import Episode, EpisodeStatus, TurnRecord
from grasp.env.parser import ParsedTurn, ParseErrorKind, parse_turn
from grasp.env.tool_specs import compact_tool_list, tool_schema, tool_specs
from grasp.env.tools import (
    ToolCall,
    ToolContext,
    ToolRole,
    default_tool_names,
    get_tool,
    tools_with,
)
from grasp.types import Granularity, Question, StopReason, StrEnum, check_range, parse_enum


class SearchScope(StrEnum):
    POOLED = "pooled"
    """Search the whole pooled corpus of the split (GRASP's setting)."""
    QUESTION = "question"
    """Search only the question's own paragraphs (per-question distractor setting)."""


class HitLabels(StrEnum):
    """How a search hit is labelled, and so what read_paragraph takes."""

    IDS = "ids"
    """``[s12 p4 "Title"]``; read_paragraph takes a sentence_id or paragraph_id (the paper's
    corpus ids, as every committed run used)."""
    HANDLES = "handles"
    """``[3] Title | text``, numbered per episode; read_paragraph takes ``{"hit": 3}``. The
    trajectory keeps each hit's sentence and paragraph ids and each read's f(s)."""


class QuestionQuotes(StrEnum):
    """How the question's double quotes are shown in the first user message."""

    AS_WRITTEN = "as_written"
    """As the dataset writes them (every committed run)."""
    SINGLE = "single"
    """As single quotes: a policy copies the question into a JSON string argument, where an
    unescaped ``"`` ends the string (a small model then echoes ``"?"?"`` until the call never
    closes). The question's words and the gold answers are unchanged."""


class FinalMessagePolicy(StrEnum):
    ANSWER = "answer"
    """A turn without a tool call is taken as the final answer (stop reason no_tool_call)."""
    ERROR = "error"
    """A turn without a tool call is an error observation and costs a turn."""


@dataclass
class EnvConfig:
    """The tools, budgets and rules of an episode."""

    tools: list[str] = field(default_factory=default_tool_names)
    """Tools offered, any registered ones; by default those registered as default
    (semantic_search, keyword_search, read_paragraph, answer). Ablations drop read_paragraph,
    semantic_search or keyword_search."""
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
    citations: bool = False
    """answer may take the ids of the sentences it rests on, scored against the supporting
    facts; off in the paper's configuration (and then prompts and schemas are as without it)."""
    hit_labels: str = "ids"
    """ids: hits show their sentence and paragraph ids, which read_paragraph takes; handles:
    hits show a per-episode number ([3]) that read_paragraph takes (a small model copies one
    short number where it miscopied ids)."""
    repair_calls: bool = False
    """Repair a call whose JSON does not decode but whose intent is clear, and an id copied
    as its label; each repaired turn is marked (``TurnRecord.repaired``)."""
    question_quotes: str = "as_written"
    """How the question's double quotes are shown (a ``QuestionQuotes``): as_written, or
    single (a policy copying the question into a query then writes valid JSON)."""

    def __post_init__(self) -> None:
        # Enum-valued fields are typed str for Hydra (which matches enums by member name);
        # they become enums here, with an error that names the field.
        # A tool's own name object (a shipped tool's is its ToolName) stands for it.
        self.tools = [get_tool(t, "env.tools").name for t in self.tools]
        self.scope = parse_enum(SearchScope, self.scope, "env.scope")
        self.final_message = parse_enum(FinalMessagePolicy, self.final_message, "env.final_message")
        self.hit_labels = parse_enum(HitLabels, self.hit_labels, "env.hit_labels")
        self.question_quotes = parse_enum(
            QuestionQuotes, self.question_quotes, "env.question_quotes"
        )
        self._check()

    @property
    def handles(self) -> bool:
        """Hits labelled by per-episode handle (``hit_labels=handles``)."""
        return self.hit_labels is HitLabels.HANDLES

    @property
    def reader(self) -> str | None:
        """The offered tool that reads a hit's whole paragraph (``ToolRole.READ``), if any."""
        return next((t for t in self.tools if get_tool(t).role is ToolRole.READ), None)

    @property
    def granularity(self) -> Granularity:
        """Sentence hits when the policy can expand them, whole paragraphs otherwise."""
        return Granularity.SENTENCE if self.reader is not None else Granularity.PARAGRAPH

    def _check(self) -> None:
        """Raise ValueError naming the field when the configuration cannot work."""
        answers, searches = tools_with(ToolRole.ANSWER), tools_with(ToolRole.SEARCH)
        if not any(t in self.tools for t in answers):
            raise ValueError(f"env.tools must include {_one_of(answers)}")
        if not any(t in self.tools for t in searches):
            raise ValueError(f"env.tools must include a search tool: {_one_of(searches)}")
        readers = _one_of(tools_with(ToolRole.READ))
        if self.citations and self.granularity is not Granularity.SENTENCE:
            raise ValueError(
                "env.citations cites sentence ids, which only sentence hits show: add "
                f"{readers} to env.tools or set env.citations=false"
            )
        if self.handles and self.granularity is not Granularity.SENTENCE:
            raise ValueError(
                f"env.hit_labels=handles labels sentence hits for {readers}: add "
                f"{readers} to env.tools or set env.hit_labels=ids"
            )
        if self.handles and (self.citations or self.demonstration):
            field_name = "env.citations" if self.citations else "env.demonstration"
            raise ValueError(
                f"{field_name} shows sentence ids, which env.hit_labels=handles does not: set "
                f"{field_name}=false or env.hit_labels=ids"
            )
        if len(set(self.tools)) != len(self.tools):
            raise ValueError(f"env.tools lists a tool twice: {self.tools}")
        # max_query_chars=0 would refuse every search; max_observation_chars<1 shows no text.
        for name in ("top_k", "turn_budget", "max_query_chars", "max_observation_chars"):
            check_range(f"env.{name}", getattr(self, name), low=1)


def shown_question(text: str, quotes: QuestionQuotes) -> str:
    """The question as the first user message shows it (``env.question_quotes``).

    >>> shown_question('Who wrote "Lulu"?', QuestionQuotes.SINGLE)
    "Who wrote 'Lulu'?"
    """
    return text.replace('"', "'") if quotes is QuestionQuotes.SINGLE else text


def _one_of(names: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``: the registered tools of a role, in a message."""
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} or {names[-1]}"


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


class RetrievalEnvironment:
    """Runs the tools of many episodes against one index, batching searches per tool."""

    def __init__(self, index: SearchIndex, config: EnvConfig) -> None:
        if config.top_k > index.corpus.num_units(config.granularity):
            raise ValueError(
                f"env.top_k={config.top_k} exceeds the {config.granularity}s in the corpus "
                f"({index.corpus.num_units(config.granularity)})"
            )
        self.index = index
        self.config = config
        citations, handles = config.citations, config.handles
        self.offered_tools = {name: get_tool(name) for name in config.tools}
        """The tool objects of ``config.tools``, by name, resolved once: a call runs the tool
        the episode was built with."""
        self.specs = tool_specs(config.tools, citations, handles)
        self.tool_schemas = [
            tool_schema(t, config.granularity, citations, handles) for t in config.tools
        ]
        self.system_prompt = observations.system_prompt(config.reader, citations, handles)
        if not config.schemas_in_prompt:
            self.system_prompt += "\n\n" + compact_tool_list(config.tools, citations, handles)
        self.context = ToolContext(
            index=index,
            top_k=config.top_k,
            granularity=config.granularity,
            question_scoped=config.scope is SearchScope.QUESTION,
            read_requires_retrieved=config.read_requires_retrieved,
            max_observation_chars=config.max_observation_chars,
            citations=citations,
            handles=handles,
        )

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
            messages += demonstration(self.config.tools, self.config.turn_budget)
        messages.append(
            {
                "role": "user",
                "content": observations.user_prompt(
                    shown_question(question.question, self.config.question_quotes),
                    self.config.turn_budget,
                ),
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
        limit, repair = self.config.max_query_chars, self.config.repair_calls
        parsed = [parse_turn(text, self.specs, limit, repair) for text in texts]
        results: list[str | None] = [None] * len(episodes)
        by_tool: dict[str, list[tuple[int, ToolCall]]] = {}
        for i, (episode, text, turn) in enumerate(zip(episodes, texts, parsed, strict=True)):
            episode.status = EpisodeStatus.PROCESSING_TOOLS
            episode.messages.append({"role": "assistant", "content": text})
            episode.turns.append(TurnRecord(text=text, repaired=turn.repaired))
            if turn.call is None:
                results[i] = self._reject(episode, turn)
            else:
                episode.record_call(turn.call)
                by_tool.setdefault(turn.call.name, []).append((i, turn.call))
        for tool, group in by_tool.items():
            members = [i for i, _ in group]
            calls = [call for _, call in group]
            run = self.offered_tools[tool].run
            observed = run([episodes[i] for i in members], calls, self.context)
            for i, observation in zip(members, observed, strict=True):
                results[i] = observation
        return [
            self._finish_turn(episode, observation)
            for episode, observation in zip(episodes, results, strict=True)
        ]

    def _reject(self, episode: Episode, turn: ParsedTurn) -> str | None:
        """A turn without a valid call: an error observation, or the final answer."""
        assert turn.error is not None  # ParsedTurn holds exactly one of call and error
        kind = turn.error.kind
        if kind is ParseErrorKind.NO_TOOL_CALL and (
            self.config.final_message is FinalMessagePolicy.ANSWER
        ):
            episode.answer = turn.reasoning
            episode.terminate(StopReason.NO_TOOL_CALL)
            return None
        episode.record_error(kind)
        return observations.format_error(turn.error.message, self.config.max_observation_chars)

    def _finish_turn(self, episode: Episode, observation: str | None) -> str | None:
        """Close the turn: the tool message with the turn counter, or the episode's end."""
        if episode.done:
            return None
        if episode.turns_left <= 0:
            episode.turns[-1].observation = observation
            episode.terminate(StopReason.TURN_BUDGET)
            return None
        text = f"{observation}\n{observations.turns_left_line(episode.turns_left)}"
        episode.turns[-1].observation = text
        episode.messages.append({"role": "tool", "content": text})
        episode.status = EpisodeStatus.GENERATING
        return text

    def stop(self, episode: Episode, reason: StopReason) -> None:
        """End an episode from outside (token budget exhausted, generation error)."""
        if not episode.done:
            episode.terminate(reason)
