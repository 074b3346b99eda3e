"""The read tool: ``read_paragraph`` shows a whole paragraph, and the read joins D_r.

It reads by a shown sentence's or paragraph's id, or, with ``env.hit_labels=handles``, by the
number a search hit was labelled with (the paper's expansion f(s) of a retrieved sentence).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from grasp.env.episode import INVALID_CALL, Episode
from grasp.env.observations import clip, escaped, format_error, one_line, quoted
from grasp.env.tools.registry import (
    SCHEMA_ONLY,
    Tool,
    ToolCall,
    ToolContext,
    ToolRole,
    refuse,
)
from grasp.types import READ_EVIDENCE, ToolName


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
    role = ToolRole.READ
    evidence = READ_EVIDENCE
    default = True
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

    def compact_for(self, citations: bool, handles: bool = False) -> str:
        return self.compact_by_hit if handles else self.compact

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
        return self._expand(episode, paragraph_id, context)

    def _read_hit(self, episode: Episode, handle: int, context: ToolContext) -> str:
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
        episode.turns[-1].read = {
            "hit": handle,
            "sentence_id": sentence_id,
            "paragraph_id": paragraph_id,
        }
        return self._expand(episode, paragraph_id, context, handle=handle)

    def _expand(
        self, episode: Episode, paragraph_id: int, context: ToolContext, handle: int | None = None
    ) -> str:
        """A read that runs: the paragraph joins D_r, its sentences count as shown, and its
        text is the observation (headed by ``handle`` when read by hit)."""
        corpus = context.index.corpus
        episode.add_evidence(self.evidence, (paragraph_id,))
        ids = corpus.sentence_ids(paragraph_id)
        episode.shown_sentence_ids.update(ids)
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
