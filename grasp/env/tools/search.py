"""The search tools: one batched index query per tool per turn, and how hits are shown.

``semantic_search`` (dense, D_s) and ``keyword_search`` (BM25, D_k) return sentences when a
read tool is offered and whole paragraphs otherwise; ``search`` (Search-R1's single search,
the baseline tool set) always returns whole paragraphs and counts as semantic search (D_s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from grasp.env.episode import Episode
from grasp.env.observations import HANDLE_SEPARATOR, clip, escaped, one_line, quoted
from grasp.env.tools.registry import SCHEMA_ONLY, Tool, ToolCall, ToolContext, ToolRole
from grasp.types import (
    KEYWORD_EVIDENCE,
    READ_EVIDENCE,
    SEMANTIC_EVIDENCE,
    Granularity,
    Hit,
    Retriever,
    ToolName,
)


def format_hits(
    tool: str,
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
    """A search: one batched index query for every episode that called it this turn; its
    hits' paragraphs join its ``evidence`` kind."""

    role = ToolRole.SEARCH
    retriever: ClassVar[Retriever]
    evidence: ClassVar[str]

    def granularity(self, episode_granularity: Granularity) -> Granularity:
        """What one hit is: the episode's granularity, unless the tool fixes it."""
        return episode_granularity

    def run(
        self, episodes: Sequence[Episode], calls: Sequence[ToolCall], context: ToolContext
    ) -> list[str | None]:
        granularity = self.granularity(context.granularity)
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
        episode.add_evidence(self.evidence, paragraph_ids)
        episode.shown_paragraph_ids |= paragraph_ids
        episode.shown_sentence_ids.update(h.sentence_id for h in hits if h.sentence_id is not None)
        if granularity is Granularity.PARAGRAPH:
            # A whole paragraph in the results has been read: R_R stays meaningful in the
            # paragraph-granularity ablation, which has no read_paragraph tool.
            episode.add_evidence(READ_EVIDENCE, paragraph_ids)
        return numbers


class SemanticSearch(SearchTool):
    name = ToolName.SEMANTIC_SEARCH
    retriever = Retriever.DENSE
    evidence = SEMANTIC_EVIDENCE
    default = True
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


class KeywordSearch(SearchTool):
    name = ToolName.KEYWORD_SEARCH
    retriever = Retriever.BM25
    evidence = KEYWORD_EVIDENCE
    default = True
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


class Search(SearchTool):
    """Search-R1's single search: dense, whole paragraphs, counted as semantic search (D_s)."""

    name = ToolName.SEARCH
    retriever = Retriever.DENSE
    evidence = SEMANTIC_EVIDENCE
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

    def granularity(self, episode_granularity: Granularity) -> Granularity:
        return Granularity.PARAGRAPH
