r"""The text the policy reads around the tools: prompts, the turn counter, errors, quoting.

Each tool's own observation (search hits, a paragraph) is written by its tool object in
``grasp.env.tools``, with the primitives defined here. Retrieved text is data. It only ever
appears inside these observations, which the rollout places in tool-result messages and
tokenizes so that special-token strings in a document stay plain text; the parser never reads
them.

Nor can retrieved text forge an observation's structure. Every hit is one line that starts
with its numbered label (``1. [s12 p3 "Title"] text``) and the turn counter is the last line,
so retrieved text is written on one line (``one_line``: any line break becomes a space), and a
title or query is written between double quotes with ``"`` and ``\`` escaped (``quoted``, as
in JSON): a document cannot start a hit line or a counter line of its own, and a title
cannot close its label early. Readers of hit lines match ``HIT_TITLE`` and ``unquote`` it.

What a policy wrote (a query, a tool name, a bad value) is echoed the same way, and inside
the quotes its control and bidirectional characters are escaped (``escaped``: ``\x00``,
``\u202e``): a right-to-left override or a NUL byte in a query would otherwise reorder or
hide the observation around it, on the screen of whoever reads the transcript. Printable
text, in any script, is written as it is.
"""

from __future__ import annotations

import re

_CORPUS = "You answer multi-hop questions by searching a corpus of Wikipedia paragraphs"
_CALL = "Each turn, think briefly, then call exactly one tool inside <tool_call></tool_call> tags."
_SENTENCE_HITS = (
    'Search hits show ids: [s<sentence id> p<paragraph id> "<title>"]. Use {reader} to '
    "read the whole paragraph around a useful sentence."
)
_HANDLE_HITS = (
    "Each search hit starts with its number: [3] Title | sentence. Use {reader} with "
    'that number, {{"hit": 3}}, to read the whole paragraph around a useful sentence.'
)
_PARAGRAPH_HITS = 'Search hits are whole paragraphs, shown as [p<paragraph id> "<title>"].'
_CLOSING = (
    "Search again with new words when a hop is missing. When you know the answer, call answer "
    "with a short answer (a name, date, number, or yes/no), not a sentence. You have a limited "
    "number of turns; every call uses one."
)


CITATIONS_HINT = (
    "With your answer, give in citations the ids of the sentences it rests on, e.g. "
    '{"answer": "...", "citations": [12, 40]}.'
)
"""The system prompt's last sentence when ``env.citations`` is on."""


HANDLE_SEPARATOR = " | "
"""Between a hit's title and its text when hits are labelled by handle (``[3] Title | text``)."""


def system_prompt(reader: str | None, citations: bool = False, handles: bool = False) -> str:
    """The task description, worded for the tools of the episode: ``reader`` is the offered
    tool that reads a hit's paragraph (read_paragraph), None when there is none and hits are
    whole paragraphs (and, with ``citations``, asking the answer for the sentence ids it rests
    on; with ``handles``, reads by a hit's number)."""
    if reader is not None:
        hits = (_HANDLE_HITS if handles else _SENTENCE_HITS).format(reader=reader)
        prompt = f"{_CORPUS}, split into sentences. {_CALL} {hits} {_CLOSING}"
    else:
        prompt = f"{_CORPUS}. {_CALL} {_PARAGRAPH_HITS} {_CLOSING}"
    return f"{prompt} {CITATIONS_HINT}" if citations else prompt


_LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
"""Every character ``str.splitlines`` breaks a line at."""
HIT_TITLE = r'"((?:[^"\\\n]|\\.)*)"'
"""A regular expression of a ``quoted`` text; its group is the text still escaped."""


def one_line(text: str) -> str:
    """``text`` with each run of line breaks replaced by one space."""
    return _LINE_BREAKS.sub(" ", text)


_UNPRINTABLE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""The C0 and C1 controls, DEL, every Bidi_Control character (the marks, embeddings,
overrides and isolates) and lone surrogates: what may not reach an observation raw. Joiners
(U+200C, U+200D) stay: Persian words and emoji sequences need them."""
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)")


def escaped(text: str) -> str:
    r"""``text`` with each ``_UNPRINTABLE`` character written as ``\xNN`` or ``\uNNNN``."""
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def quoted(text: str) -> str:
    r"""``text`` on one line between double quotes, ``\`` and ``"`` escaped with ``\``, and
    control and bidirectional characters as ``\xNN`` / ``\uNNNN`` (``escaped``)."""
    return '"' + escaped(one_line(text).replace("\\", "\\\\").replace('"', '\\"')) + '"'


def unquote(text: str) -> str:
    """The text of a ``quoted`` string, given what ``HIT_TITLE`` matched between the quotes."""
    return _ESCAPE.sub(_unescape, text)


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    return chr(int(code[1:], 16)) if len(code) > 1 else code


def user_prompt(question: str, turn_budget: int) -> str:
    """The first user message: the question (on one line) and the turn budget T."""
    return f"Question: {one_line(question)}\nYou have {turn_budget} turns."


def turns_left_line(turns_left: int) -> str:
    noun = "turn" if turns_left == 1 else "turns"
    return f"[{turns_left} {noun} left]"


_TRUNCATED = " [...truncated]"


def clip(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, saying so, so a huge paragraph cannot flood context."""
    if len(text) <= limit:
        return text
    return text[: max(limit - len(_TRUNCATED), 0)] + _TRUNCATED


def format_error(message: str, max_chars: int | None = None) -> str:
    """An error observation, cut to ``max_chars`` (it may echo a model's huge id or text)."""
    text = message if message.startswith("Error") else f"Error: {message}"
    return text if max_chars is None else clip(text, max_chars)
