r"""How tool results are shown to the policy: the text of every observation in one place.

Retrieved text is data. It only ever appears inside these observations, which the rollout
places in tool-result messages and tokenizes so that special-token strings in a document
stay plain text; the parser never reads them.

Nor can retrieved text forge an observation's structure. Every hit is one line that starts
with its numbered label (``1. [s12 p3 "Title"] text``) and the turn counter is the last line,
so retrieved text is written on one line (``one_line``: any line break becomes a space), and a
title or query is written between double quotes with ``"`` and ``\`` escaped (``quoted``, as
in JSON): a document cannot start a hit line or a counter line of its own, and a title
cannot close its label early. Readers of hit lines match ``HIT_TITLE`` and ``unquote`` it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from grasp.types import Hit, Retriever, ToolName

_CORPUS = "You answer multi-hop questions by searching a corpus of Wikipedia paragraphs"
_CALL = "Each turn, think briefly, then call exactly one tool inside <tool_call></tool_call> tags."
_SENTENCE_HITS = (
    'Search hits show ids: [s<sentence id> p<paragraph id> "<title>"]. Use read_paragraph to '
    "read the whole paragraph around a useful sentence."
)
_PARAGRAPH_HITS = 'Search hits are whole paragraphs, shown as [p<paragraph id> "<title>"].'
_CLOSING = (
    "Search again with new words when a hop is missing. When you know the answer, call answer "
    "with a short answer (a name, date, number, or yes/no), not a sentence. You have a limited "
    "number of turns; every call uses one."
)


def system_prompt(tools: Sequence[str]) -> str:
    """The task description, worded for the tools of the episode."""
    if "read_paragraph" in tools:
        return f"{_CORPUS}, split into sentences. {_CALL} {_SENTENCE_HITS} {_CLOSING}"
    return f"{_CORPUS}. {_CALL} {_PARAGRAPH_HITS} {_CLOSING}"


_LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
"""Every character ``str.splitlines`` breaks a line at."""
HIT_TITLE = r'"((?:[^"\\\n]|\\.)*)"'
"""A regular expression of a ``quoted`` text; its group is the text still escaped."""


def one_line(text: str) -> str:
    """``text`` with each run of line breaks replaced by one space."""
    return _LINE_BREAKS.sub(" ", text)


def quoted(text: str) -> str:
    r"""``text`` on one line between double quotes, ``\`` and ``"`` escaped with ``\``."""
    return '"' + one_line(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def unquote(escaped: str) -> str:
    """The text of a ``quoted`` string, given what ``HIT_TITLE`` matched between the quotes."""
    return re.sub(r"\\(.)", r"\1", escaped)


def user_prompt(question: str, turn_budget: int) -> str:
    """The first user message: the question (on one line) and the turn budget T."""
    return f"Question: {one_line(question)}\nYou have {turn_budget} turns."


_COMPACT_SIGNATURES = {
    "semantic_search": "semantic_search(query): top sentences by meaning",
    "keyword_search": "keyword_search(query): top sentences by shared words (BM25)",
    "read_paragraph": "read_paragraph(sentence_id or paragraph_id): the whole paragraph",
    "search": "search(query): top paragraphs",
    "answer": "answer(answer): final short answer; ends the episode",
}


def compact_tool_list(tools: Sequence[str]) -> str:
    """One line per tool and the call format: a short stand-in for the JSON schemas."""
    lines = [f"- {_COMPACT_SIGNATURES[str(t)]}" for t in tools]
    if "read_paragraph" not in tools:  # searches return whole paragraphs then
        lines = [line.replace("top sentences", "top paragraphs") for line in lines]
    example = '<tool_call>\n{"name": "<tool>", "arguments": {"<argument>": <value>}}\n</tool_call>'
    return "Tools:\n" + "\n".join(lines) + "\nCall format:\n" + example


def _call(name: str, **arguments: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


_DEMO_QUESTION = "Where was the director of Jaws born?"
_DEMO_HOPS = (
    # query, paragraph id, title, first sentence id, sentences, index of the hit sentence
    (_DEMO_QUESTION, 3, "Jaws (film)", 10,
     ("Jaws is a 1975 American thriller film.", "It was directed by Steven Spielberg."), 1),
    ("Steven Spielberg born", 9, "Steven Spielberg", 41,
     ("Steven Spielberg is an American filmmaker.", "Spielberg was born in Cincinnati, Ohio."), 1),
)  # fmt: skip
_DEMO_ANSWER = "Cincinnati"
_SEARCH_ORDER = (ToolName.SEMANTIC_SEARCH, ToolName.KEYWORD_SEARCH, ToolName.SEARCH)


def demonstration(tools: Sequence[str], turn_budget: int) -> list[dict[str, str]]:
    """A short worked episode (invented, not from any dataset) shown before the question.

    It uses only the episode's tools: one search per hop (alternating between the search
    tools available), then, when ``read_paragraph`` is a tool, a read of the hit sentence's
    paragraph, then the answer. Hits are sentences or whole paragraphs, as in the episode.
    """
    searches = [tool for tool in _SEARCH_ORDER if tool in tools]
    if not searches:
        raise ValueError(f"a demonstration needs a search tool, got {list(tools)}")
    reads = ToolName.READ_PARAGRAPH in tools
    budget = max(turn_budget, len(_DEMO_HOPS) + int(reads) + 1)
    messages = [{"role": "user", "content": user_prompt(_DEMO_QUESTION, budget)}]

    def step(call: str, observation: str) -> None:
        used = (len(messages) + 1) // 2
        left = turns_left_line(budget - used)
        messages.append({"role": "assistant", "content": call})
        messages.append({"role": "tool", "content": f"{observation}\n{left}"})

    for hop, (query, paragraph_id, title, first_id, sentences, hit) in enumerate(_DEMO_HOPS):
        tool = searches[hop % len(searches)]
        result = Hit(
            paragraph_id=paragraph_id,
            sentence_id=first_id + hit if reads else None,
            title=title,
            text=sentences[hit] if reads else " ".join(sentences),
            score=1.0,
            retriever=Retriever.BM25 if tool is ToolName.KEYWORD_SEARCH else Retriever.DENSE,
            rank=0,
        )
        step(_call(tool, query=query), format_hits(tool, query, [result], max_chars=400))
    if reads:
        _, paragraph_id, title, first_id, sentences, hit = _DEMO_HOPS[-1]
        paragraph = format_paragraph(paragraph_id, title, sentences, first_id, max_chars=400)
        step(_call(ToolName.READ_PARAGRAPH, sentence_id=first_id + hit), paragraph)
    messages.append({"role": "assistant", "content": _call(ToolName.ANSWER, answer=_DEMO_ANSWER)})
    return messages


def turns_left_line(turns_left: int) -> str:
    noun = "turn" if turns_left == 1 else "turns"
    return f"[{turns_left} {noun} left]"


_TRUNCATED = " [...truncated]"


def clip(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, saying so, so a huge paragraph cannot flood context."""
    if len(text) <= limit:
        return text
    return text[: max(limit - len(_TRUNCATED), 0)] + _TRUNCATED


def format_hits(tool: ToolName, query: str, hits: Sequence[Hit], max_chars: int) -> str:
    """Search results, one numbered line per hit (a sentence or a whole paragraph)."""
    if not hits:
        return f"{tool}({quoted(query)}): no results. Try other words."
    lines = [f"{tool}({quoted(query)}):"]
    for number, hit in enumerate(hits, start=1):
        if hit.sentence_id is None:
            label = f"[p{hit.paragraph_id} {quoted(hit.title)}]"
        else:
            label = f"[s{hit.sentence_id} p{hit.paragraph_id} {quoted(hit.title)}]"
        lines.append(f"{number}. {label} {clip(one_line(hit.text), max_chars)}")
    return "\n".join(lines)


def format_paragraph(
    paragraph_id: int, title: str, sentences: Sequence[str], first_sentence_id: int, max_chars: int
) -> str:
    """A whole paragraph with the id of each sentence."""
    body = " ".join(
        f"(s{first_sentence_id + offset}) {one_line(text)}"
        for offset, text in enumerate(sentences)
        if text
    )
    return f"read_paragraph p{paragraph_id} {quoted(title)}:\n{clip(body, max_chars)}"


def format_error(message: str, max_chars: int | None = None) -> str:
    """An error observation, cut to ``max_chars`` (it may echo a model's huge id or text)."""
    text = message if message.startswith("Error") else f"Error: {message}"
    return text if max_chars is None else clip(text, max_chars)
