"""The answer tool: ``answer`` submits the final answer, with its citations when
``env.citations`` is on, and ends the episode."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from grasp.env.episode import Citations, Episode
from grasp.env.tools.registry import SCHEMA_ONLY, Tool, ToolCall, ToolContext, ToolRole
from grasp.types import StopReason, ToolName

if TYPE_CHECKING:
    from grasp.corpus.corpus import SentenceCorpus


class Answer(Tool):
    """Submits the final answer and ends the episode (stop reason answered).

    With ``env.citations`` on, the answer may name the sentence ids it rests on. A bad
    citation never costs the answer: the answer still ends the episode, and each citation
    that is not an integer id, names no sentence of the corpus, or names one this episode was
    never shown is left out of ``Episode.citations`` and counted as invalid there (a
    ``citations`` value that is not a list counts as one invalid citation).
    """

    name = ToolName.ANSWER
    role = ToolRole.ANSWER
    default = True
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

    def compact_for(self, citations: bool, handles: bool = False) -> str:
        return self.compact_citing if citations else self.compact

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
