"""The tools a policy can call: one object per tool, everything about that tool in one place.

A tool object holds its **signature** (a schema-only function named after the tool, whose type
hints and Google-style docstring *are* its definition, the TRL/transformers convention that
``grasp.env.tool_specs`` turns into the JSON schema), its **batched execution** (``run`` takes
every call of one turn that chose it), its **observation text** and **what it adds to the
episode's evidence** (D_s, D_k, D_r, and the ids the policy has been shown).

``RetrievalEnvironment`` parses each turn, groups the valid calls by tool and dispatches each
group to ``TOOLS[name].run``. Adding a tool is one class here, its entry in ``TOOLS``, its
``ToolName`` and its place in the tool-set config (``env.tools``).

    observations = TOOLS[ToolName.KEYWORD_SEARCH].run(episodes, calls, context)
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from grasp.corpus.corpus import SentenceCorpus
from grasp.corpus.index import SearchIndex
from grasp.env.episode import INVALID_CALL, Citations, Episode
from grasp.env.observations import HANDLE_SEPARATOR, clip, escaped, format_error, one_line, quoted
from grasp.types import Granularity, Hit, Retriever, StopReason, ToolName

if TYPE_CHECKING:
    from grasp.env.parser import ToolCall

SCHEMA_ONLY = "schema only: the tool object's run implements this tool"


@dataclass(frozen=True)
class ToolContext:
    """What a tool reads from the environment: the index and the episode's rules."""

    index: SearchIndex
    top_k: int
    """Hits per search (the paper's K)."""
    granularity: Granularity
    """Sentence hits when read_paragraph is offered, whole paragraphs otherwise."""
    question_scoped: bool
    """Search only each question's own paragraphs (``Episode.scope``)."""
    read_requires_retrieved: bool
    """read_paragraph accepts only ids shown earlier in the episode."""
    max_observation_chars: int
    """Each hit or paragraph text is cut to this many characters."""
    citations: bool = False
    """answer takes the sentence ids it rests on (``env.citations``)."""
    handles: bool = False
    """Hits are labelled ``[n]``, numbered per episode, and read_paragraph takes that number
    (``env.hit_labels=handles``); else hits show their sentence and paragraph ids."""


class Tool(abc.ABC):
    """One tool: its signature, its batched execution, its observations and its evidence."""

    name: ClassVar[ToolName]
    compact: ClassVar[str]
    """One line standing in for the JSON schema when ``env.schemas_in_prompt`` is false."""
    exactly_one_of: ClassVar[tuple[str, ...]] = ()
    """Optional arguments of which a call must give exactly one (a rule the JSON schema cannot
    express; the parser enforces it)."""
    paragraph_description: ClassVar[str | None] = None
    """The description to show instead of the docstring's when hits are whole paragraphs."""

    @property
    def signature(self) -> Callable[..., str]:
        """The schema-only function named after the tool: its hints and docstring are the schema."""
        return getattr(type(self), self.name.value)

    def signature_for(self, citations: bool, handles: bool = False) -> Callable[..., str]:
        """The signature an episode shows: answer's citing one when ``env.citations`` is on,
        read_paragraph's by-hit one when ``env.hit_labels=handles``."""
        return self.signature

    def exactly_one_of_for(self, handles: bool) -> tuple[str, ...]:
        """``exactly_one_of`` of the signature ``signature_for`` gives."""
        return self.exactly_one_of

    @abc.abstractmethod
    def run(
        self, episodes: Sequence[Episode], calls: Sequence[ToolCall], context: ToolContext
    ) -> list[str | None]:
        """Execute one turn's calls of this tool, ``calls[i]`` made by ``episodes[i]``.

        The call is already recorded on each episode's current turn. Returns each episode's
        observation, or None for an episode that the call ended.
        """


def refuse(episode: Episode, problem: str, context: ToolContext) -> str:
    """Mark the current turn a refused call and explain why, as its observation."""
    episode.record_error(INVALID_CALL)
    return format_error(
        f"{problem} Read a sentence or paragraph id from a search result.",
        context.max_observation_chars,
    )


# ------------------------------------------------------------------ searches


def format_hits(
    tool: ToolName,
    query: str,
    hits: Sequence[Hit],
    max_chars: int,
    handles: Sequence[int] | None = None,
) -> str:
    """Search results, one numbered line per hit (a sentence or a whole paragraph).

    With ``handles`` (one per hit), each line is ``[n] Title | text``: one short number to
    read it by, and no quotes or ids for a small model to copy into its next call."""
    if not hits:
        return f"{tool}({quoted(query)}): no results. Try other words."
    lines = [f"{tool}({quoted(query)}):"]
    if handles is not None:
        for handle, hit in zip(handles, hits, strict=True):
            title = escaped(one_line(hit.title)).replace(HANDLE_SEPARATOR, " / ")
            lines.append(
                f"[{handle}] {title}{HANDLE_SEPARATOR}{clip(one_line(hit.text), max_chars)}"
            )
        return "\n".join(lines)
    for number, hit in enumerate(hits, start=1):
        if hit.sentence_id is None:
            label = f"[p{hit.paragraph_id} {quoted(hit.title)}]"
        else:
            label = f"[s{hit.sentence_id} p{hit.paragraph_id} {quoted(hit.title)}]"
        lines.append(f"{number}. {label} {clip(one_line(hit.text), max_chars)}")
    return "\n".join(lines)


class SearchTool(Tool):
    """A search: one batched index query for every episode that called it this turn."""

    retriever: ClassVar[Retriever]

    def granularity(self, context: ToolContext) -> Granularity:
        """What one hit is: the episode's granularity, unless the tool fixes it."""
        return context.granularity

    @abc.abstractmethod
    def found(self, episode: Episode) -> set[int]:
        """The evidence set the hits' paragraphs join: D_s or D_k."""

    def run(
        self, episodes: Sequence[Episode], calls: Sequence[ToolCall], context: ToolContext
    ) -> list[str | None]:
        granularity = self.granularity(context)
        queries = [call.arguments["query"] for call in calls]
        scopes = [episode.scope for episode in episodes] if context.question_scoped else None
        hit_lists = context.index.search(
            queries, self.retriever, k=context.top_k, granularity=granularity, scopes=scopes
        )
        observed: list[str | None] = []
        for episode, query, hits in zip(episodes, queries, hit_lists, strict=True):
            handles = self.record(episode, hits, granularity, context.handles)
            text = format_hits(self.name, query, hits, context.max_observation_chars, handles)
            observed.append(text)
        return observed

    def record(
        self,
        episode: Episode,
        hits: Sequence[Hit],
        granularity: Granularity,
        handles: bool = False,
    ) -> list[int] | None:
        """Add the hits to the episode's evidence, its shown ids and its current turn; with
        ``handles``, give each sentence hit its episode handle (the same sentence keeps the one
        it was first shown with) and return them."""
        numbers = [episode.handle(h.sentence_id, h.paragraph_id) for h in hits] if handles else None
        episode.turns[-1].hits = [
            {"sentence_id": h.sentence_id, "paragraph_id": h.paragraph_id, "score": h.score}
            for h in hits
        ]
        if numbers is not None:
            for record, number in zip(episode.turns[-1].hits, numbers, strict=True):
                record["handle"] = number
        paragraph_ids = {hit.paragraph_id for hit in hits}
        self.found(episode).update(paragraph_ids)
        episode.shown_paragraph_ids |= paragraph_ids
        episode.shown_sentence_ids.update(h.sentence_id for h in hits if h.sentence_id is not None)
        if granularity is Granularity.PARAGRAPH:
            # A whole paragraph in the results has been read: R_R stays meaningful in the
            # paragraph-granularity ablation, which has no read_paragraph tool.
            episode.read_paragraph_ids |= paragraph_ids
        return numbers


class SemanticSearch(SearchTool):
    name = ToolName.SEMANTIC_SEARCH
    retriever = Retriever.DENSE
    compact = "semantic_search(query): top sentences by meaning"
    paragraph_description = (
        "Search the corpus for whole paragraphs whose meaning is closest to the query. Good "
        "for paraphrased or descriptive questions."
    )

    @staticmethod
    def semantic_search(query: str) -> str:
        """Search the corpus for single sentences whose meaning is closest to the query.

        Good for paraphrased or descriptive questions. Read a hit's whole paragraph with
        read_paragraph when one sentence is not enough.

        Args:
            query: What to look for, as a short natural-language question or statement.

        Returns:
            The top-K sentences, each with its sentence id, paragraph id and paragraph title.
        """
        raise NotImplementedError(SCHEMA_ONLY)

    def found(self, episode: Episode) -> set[int]:
        return episode.semantic_paragraph_ids


class KeywordSearch(SearchTool):
    name = ToolName.KEYWORD_SEARCH
    retriever = Retriever.BM25
    compact = "keyword_search(query): top sentences by shared words (BM25)"
    paragraph_description = (
        "Search the corpus for whole paragraphs that share the most words with the query "
        "(BM25). Good for exact names, titles, dates and rare terms."
    )

    @staticmethod
    def keyword_search(query: str) -> str:
        """Search the corpus for single sentences that share the most words with the query (BM25).

        Good for exact names, titles, dates and rare terms. Read a hit's whole paragraph with
        read_paragraph when one sentence is not enough.

        Args:
            query: The keywords to match, e.g. a name plus a distinctive term.

        Returns:
            The top-K sentences, each with its sentence id, paragraph id and paragraph title.
        """
        raise NotImplementedError(SCHEMA_ONLY)

    def found(self, episode: Episode) -> set[int]:
        return episode.keyword_paragraph_ids


class Search(SearchTool):
    """Search-R1's single search: dense, whole paragraphs, counted as semantic search (D_s)."""

    name = ToolName.SEARCH
    retriever = Retriever.DENSE
    compact = "search(query): top paragraphs"

    @staticmethod
    def search(query: str) -> str:
        """Search the corpus for the paragraphs most relevant to the query.

        Args:
            query: What to look for, as a short question or keywords.

        Returns:
            The top-K paragraphs, each with its paragraph id, title and full text.
        """
        raise NotImplementedError(SCHEMA_ONLY)

    def granularity(self, context: ToolContext) -> Granularity:
        return Granularity.PARAGRAPH

    def found(self, episode: Episode) -> set[int]:
        return episode.semantic_paragraph_ids


# ------------------------------------------------------------------ reading and answering


def format_paragraph(
    paragraph_id: int,
    title: str,
    sentences: Sequence[str],
    first_sentence_id: int,
    max_chars: int,
    handle: int | None = None,
) -> str:
    """A whole paragraph with the id of each sentence; read by a hit's ``handle``, the
    paragraph under that handle, its sentences without ids (nothing in it is to be copied)."""
    if handle is not None:
        body = " ".join(one_line(text) for text in sentences if text)
        title_text = escaped(one_line(title))
        return f"read_paragraph [{handle}] {title_text}:\n{clip(body, max_chars)}"
    body = " ".join(
        f"(s{first_sentence_id + offset}) {one_line(text)}"
        for offset, text in enumerate(sentences)
        if text
    )
    return f"read_paragraph p{paragraph_id} {quoted(title)}:\n{clip(body, max_chars)}"


class ReadParagraph(Tool):
    """Reads a paragraph by a sentence's id or its own; the read joins D_r."""

    name = ToolName.READ_PARAGRAPH
    compact = "read_paragraph(sentence_id or paragraph_id): the whole paragraph"
    exactly_one_of = ("sentence_id", "paragraph_id")

    compact_by_hit = "read_paragraph(hit): the whole paragraph of search result [hit]"

    @staticmethod
    def read_paragraph_by_hit(hit: int) -> str:
        """Read the whole paragraph of a search result, the one its sentence comes from.

        Args:
            hit: The number in brackets before a search result, e.g. 3 for [3].

        Returns:
            The paragraph's title and all of its sentences.
        """
        raise NotImplementedError(SCHEMA_ONLY)

    def signature_for(self, citations: bool, handles: bool = False) -> Callable[..., str]:
        return type(self).read_paragraph_by_hit if handles else self.signature

    def exactly_one_of_for(self, handles: bool) -> tuple[str, ...]:
        return () if handles else self.exactly_one_of

    @staticmethod
    def read_paragraph(sentence_id: int | None = None, paragraph_id: int | None = None) -> str:
        """Read a whole paragraph: the one containing a retrieved sentence, or one given by its id.

        Give exactly one of sentence_id or paragraph_id, using an id shown in a search result.

        Args:
            sentence_id: The id of a sentence from a search result; its parent paragraph is read.
            paragraph_id: The id of a paragraph from a search result.

        Returns:
            The paragraph's title and all of its sentences, each with its sentence id.
        """
        raise NotImplementedError(SCHEMA_ONLY)

    def run(
        self, episodes: Sequence[Episode], calls: Sequence[ToolCall], context: ToolContext
    ) -> list[str | None]:
        return [self._read(e, c, context) for e, c in zip(episodes, calls, strict=True)]

    def _read(self, episode: Episode, call: ToolCall, context: ToolContext) -> str:
        if context.handles:
            return self._read_hit(episode, call.arguments["hit"], context)
        corpus = context.index.corpus
        check_shown = context.read_requires_retrieved
        sentence_id = call.arguments.get("sentence_id")
        paragraph_id = call.arguments.get("paragraph_id")
        if sentence_id is not None:
            if not corpus.has_sentence(sentence_id):
                return refuse(episode, f"sentence s{sentence_id} does not exist.", context)
            if check_shown and sentence_id not in episode.shown_sentence_ids:
                problem = f"sentence s{sentence_id} was not in your search results."
                return refuse(episode, problem, context)
            paragraph_id = corpus.paragraph_of(sentence_id)
        elif not corpus.has_paragraph(paragraph_id):
            return refuse(episode, f"paragraph p{paragraph_id} does not exist.", context)
        elif check_shown and paragraph_id not in episode.shown_paragraph_ids:
            problem = f"paragraph p{paragraph_id} was not in your search results."
            return refuse(episode, problem, context)
        episode.read_paragraph_ids.add(paragraph_id)
        ids = corpus.sentence_ids(paragraph_id)
        episode.shown_sentence_ids.update(ids)
        return format_paragraph(
            paragraph_id,
            corpus.title(paragraph_id),
            corpus.paragraph_sentences(paragraph_id),
            ids.start,
            context.max_observation_chars,
        )

    @staticmethod
    def _read_hit(episode: Episode, handle: int, context: ToolContext) -> str:
        """The paper's expansion by handle: f(s) of the sentence shown as ``[handle]``.
        Only a shown hit has a handle, so only a retrieved sentence can be expanded."""
        shown = len(episode.hit_handles)
        if not 1 <= handle <= shown:
            problem = f"there is no search result [{handle}]" + (
                f" (yours are [1] to [{shown}])." if shown else ": search first."
            )
            episode.record_error(INVALID_CALL)
            return format_error(
                f"{problem} Give the number in brackets of a result.", context.max_observation_chars
            )
        sentence_id, _ = episode.hit_handles[handle - 1]
        corpus = context.index.corpus
        paragraph_id = corpus.paragraph_of(sentence_id)
        episode.read_paragraph_ids.add(paragraph_id)
        ids = corpus.sentence_ids(paragraph_id)
        episode.shown_sentence_ids.update(ids)
        episode.turns[-1].read = {
            "hit": handle,
            "sentence_id": sentence_id,
            "paragraph_id": paragraph_id,
        }
        return format_paragraph(
            paragraph_id,
            corpus.title(paragraph_id),
            corpus.paragraph_sentences(paragraph_id),
            ids.start,
            context.max_observation_chars,
            handle=handle,
        )


# The schema names the tool by the function's name: the by-hit signature is read_paragraph.
ReadParagraph.read_paragraph_by_hit.__name__ = "read_paragraph"


class Answer(Tool):
    """Submits the final answer and ends the episode (stop reason answered).

    With ``env.citations`` on, the answer may name the sentence ids it rests on. A bad
    citation never costs the answer: the answer still ends the episode, and each citation
    that is not an integer id, names no sentence of the corpus, or names one this episode was
    never shown is left out of ``Episode.citations`` and counted as invalid there (a
    ``citations`` value that is not a list counts as one invalid citation).
    """

    name = ToolName.ANSWER
    compact = "answer(answer): final short answer; ends the episode"
    compact_citing = (
        "answer(answer, citations): final short answer, optionally with the list of sentence "
        "ids it rests on; ends the episode"
    )

    @staticmethod
    def answer(answer: str) -> str:
        """Give the final answer to the question. This ends the episode; call it exactly once.

        Args:
            answer: The final answer only, as short as possible: a name, date, number, or yes/no.

        Returns:
            Nothing: the episode ends.
        """
        raise NotImplementedError(SCHEMA_ONLY)

    @staticmethod
    def answer_citing(answer: str, citations: list[int] | None = None) -> str:
        """Give the final answer to the question. This ends the episode; call it exactly once.

        Args:
            answer: The final answer only, as short as possible: a name, date, number, or yes/no.
            citations: The ids of the sentences the answer rests on (the numbers after "s" in
                search results and read paragraphs), e.g. [12, 40].

        Returns:
            Nothing: the episode ends.
        """
        raise NotImplementedError(SCHEMA_ONLY)

    def signature_for(self, citations: bool, handles: bool = False) -> Callable[..., str]:
        return type(self).answer_citing if citations else self.signature

    def run(
        self, episodes: Sequence[Episode], calls: Sequence[ToolCall], context: ToolContext
    ) -> list[str | None]:
        for episode, call in zip(episodes, calls, strict=True):
            episode.answer = call.arguments["answer"]
            if context.citations:
                given = call.arguments.get("citations", [])
                episode.citations = resolve_citations(given, episode, context.index.corpus)
            episode.terminate(StopReason.ANSWERED)
        return [None] * len(episodes)


# The schema names the tool by the function's name: the citing signature is answer, too.
Answer.answer_citing.__name__ = "answer"


def resolve_citations(given: Any, episode: Episode, corpus: SentenceCorpus) -> Citations:
    """The sentence ids of an answer's ``citations`` that name a sentence the episode was
    shown (in the order given, each once), and how many citations did not."""
    if not isinstance(given, list):
        return Citations(sentence_ids=(), invalid=1)
    cited: list[int] = []
    invalid = 0
    for entry in given:
        sentence_id = citation_id(entry)
        valid = (
            sentence_id is not None
            and corpus.has_sentence(sentence_id)
            and sentence_id in episode.shown_sentence_ids
        )
        if not valid:
            invalid += 1
        elif sentence_id not in cited:
            cited.append(sentence_id)
    return Citations(sentence_ids=tuple(cited), invalid=invalid)


_CITATION = re.compile(r"\[?s?([0-9]{1,18})\]?")


def citation_id(entry: Any) -> int | None:
    """One citation as a sentence id: an integer (``12``, ``12.0``) or the id as the
    observations write it (``"12"``, ``"s12"``, ``"[s12]"``); None for anything else."""
    if isinstance(entry, bool):
        return None
    if isinstance(entry, int):
        return entry if entry >= 0 else None
    if isinstance(entry, float):
        return int(entry) if entry.is_integer() and entry >= 0 else None
    if isinstance(entry, str):
        match = _CITATION.fullmatch(entry.strip())
        return int(match.group(1)) if match else None
    return None


TOOLS: dict[ToolName, Tool] = {
    tool.name: tool
    for tool in (SemanticSearch(), KeywordSearch(), ReadParagraph(), Search(), Answer())
}
"""Every tool, by name; ``env.tools`` chooses which of them an episode offers."""

SEARCH_TOOLS = tuple(name for name, tool in TOOLS.items() if isinstance(tool, SearchTool))
"""The tools that search the index (a tool set needs one of them)."""


def compact_tool_list(tools: Sequence[str], citations: bool = False, handles: bool = False) -> str:
    """One line per tool and the call format: a short stand-in for the JSON schemas (answer's
    citing line when ``citations``, read_paragraph's by-hit line when ``handles``)."""
    lines = [f"- {_compact(ToolName(t), citations, handles)}" for t in tools]
    if ToolName.READ_PARAGRAPH not in tools:  # searches return whole paragraphs then
        lines = [line.replace("top sentences", "top paragraphs") for line in lines]
    example = '<tool_call>\n{"name": "<tool>", "arguments": {"<argument>": <value>}}\n</tool_call>'
    return "Tools:\n" + "\n".join(lines) + "\nCall format:\n" + example


def _compact(name: ToolName, citations: bool, handles: bool = False) -> str:
    if citations and name is ToolName.ANSWER:
        return Answer.compact_citing
    if handles and name is ToolName.READ_PARAGRAPH:
        return ReadParagraph.compact_by_hit
    return TOOLS[name].compact
