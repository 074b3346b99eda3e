"""How tool results are shown to the policy: the text of every observation in one place.

Retrieved text is data. It only ever appears inside these observations, which the rollout
places in tool-result messages and tokenizes so that special-token strings in a document
stay plain text; the parser never reads them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from grasp.types import Hit, ToolName

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


def user_prompt(question: str, turn_budget: int) -> str:
    """The first user message: the question and the turn budget T."""
    return f"Question: {question}\nYou have {turn_budget} turns."


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


def demonstration(turn_budget: int) -> list[dict[str, str]]:
    """A short worked episode (invented, not from any dataset) shown before the question."""
    return [
        {
            "role": "user",
            "content": user_prompt("Where was the director of Jaws born?", turn_budget),
        },
        {"role": "assistant", "content": _call("keyword_search", query="Jaws film director")},
        {
            "role": "tool",
            "content": 'keyword_search("Jaws film director"):\n1. [s10 p3 "Jaws (film)"] Jaws is '
            "a 1975 film directed by Steven Spielberg.\n" + turns_left_line(turn_budget - 1),
        },
        {
            "role": "assistant",
            "content": _call("semantic_search", query="Steven Spielberg birthplace"),
        },
        {
            "role": "tool",
            "content": 'semantic_search("Steven Spielberg birthplace"):\n1. [s42 p9 "Steven '
            'Spielberg"] Spielberg was born in Cincinnati, Ohio.\n'
            + turns_left_line(turn_budget - 2),
        },
        {"role": "assistant", "content": _call("answer", answer="Cincinnati")},
    ]


def turns_left_line(turns_left: int) -> str:
    noun = "turn" if turns_left == 1 else "turns"
    return f"[{turns_left} {noun} left]"


def clip(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, saying so, so a huge paragraph cannot flood context."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 14, 0)] + " [...truncated]"


def format_hits(tool: ToolName, query: str, hits: Sequence[Hit], max_chars: int) -> str:
    """Search results, one numbered line per hit (a sentence or a whole paragraph)."""
    if not hits:
        return f'{tool}("{query}"): no results. Try other words.'
    lines = [f'{tool}("{query}"):']
    for number, hit in enumerate(hits, start=1):
        if hit.sentence_id is None:
            label = f'[p{hit.paragraph_id} "{hit.title}"]'
        else:
            label = f'[s{hit.sentence_id} p{hit.paragraph_id} "{hit.title}"]'
        lines.append(f"{number}. {label} {clip(hit.text, max_chars)}")
    return "\n".join(lines)


def format_paragraph(
    paragraph_id: int, title: str, sentences: Sequence[str], first_sentence_id: int, max_chars: int
) -> str:
    """A whole paragraph with the id of each sentence."""
    body = " ".join(
        f"(s{first_sentence_id + offset}) {text}" for offset, text in enumerate(sentences) if text
    )
    return f'read_paragraph p{paragraph_id} "{title}":\n{clip(body, max_chars)}'


def format_error(message: str) -> str:
    return message if message.startswith("Error") else f"Error: {message}"
