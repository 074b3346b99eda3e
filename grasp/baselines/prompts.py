"""The baselines' own short prompts to the backend, and how its replies are read.

Every prompt is one system and one user message, so any chat backend (transformers, vLLM, an
OpenAI-compatible server) can serve it. Replies are read leniently: a small model's answer
is cut to its first line and stripped of "Answer:"-style prefixes; a grade is "relevant"
only when the reply starts with yes or relevant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from grasp.baselines.episode import Passage
from grasp.env.observations import clip
from grasp.types import StrEnum


class Purpose(StrEnum):
    """What a backend call is for (the suffix of its request id)."""

    ANSWER = "answer"
    REASON = "reason"
    GRADE = "grade"
    REWRITE = "rewrite"
    ROUTE = "route"
    GROUNDED = "grounded"
    ANSWERS = "answers"


@dataclass(frozen=True)
class Prompt:
    """One backend call: a system and a user message, and how many tokens it may write."""

    system: str
    user: str
    max_new_tokens: int
    purpose: Purpose

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


ANSWER_SYSTEM = (
    "Answer the question with a short answer only: a name, date, number, or yes/no. Do not explain."
)
REASON_SYSTEM = (
    "Answer the question step by step using the passages. Write only the next sentence of "
    "reasoning. When you know the answer, write: So the answer is: <short answer>."
)
GRADE_SYSTEM = "Judge whether a passage helps answer a question. Reply with yes or no only."
REWRITE_SYSTEM = (
    "Rewrite the question as a short search query of keywords. Reply with the query only."
)
ROUTE_SYSTEM = "Classify the question. Reply with one letter only."
GROUNDED_SYSTEM = "Judge whether an answer is supported by the passages. Reply with yes or no only."
ANSWERS_SYSTEM = "Judge whether an answer answers the question. Reply with yes or no only."
FINAL_ANSWER = "So the answer is:"
"""IRCoT's stop phrase: a reasoning sentence containing it (or "The answer is:") ends the
episode with the answer that follows."""

_ANSWER_PREFIX = re.compile(
    r"^(?:so\s+)?(?:the\s+)?(?:final\s+)?answer(?:\s+is)?\s*[:\-]?\s*", re.IGNORECASE
)
# IRCoT's stop rule, read leniently: "So the answer is" with or without the colon, and "The
# answer is:" with it (small models drop the "So"; without the colon it is too common a phrase).
_FINAL = re.compile(r"so the answer is:?|the answer is\s*:", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_ROUTE_LETTER = re.compile(r"\b([ABC])\b")
_TOOL_TAG = re.compile(r"</?tool_call>")
MAX_ANSWER_CHARS = 200
UNKNOWN = "unknown"
"""Submitted when the backend's reply holds no answer (an empty answer is not a valid call)."""


def format_passages(passages: Sequence[Passage], max_chars: int) -> str:
    return "\n".join(
        f"[{number}] {p.title}: {clip(p.text, max_chars)}"
        for number, p in enumerate(passages, start=1)
    )


def answer_prompt(
    question: str,
    passages: Sequence[Passage],
    max_chars: int,
    max_new_tokens: int,
    reasoning: Sequence[str] = (),
) -> Prompt:
    """Answer from the passages (none: from the question alone), after any reasoning so far."""
    parts = []
    if passages:
        parts.append("Passages:\n" + format_passages(passages, max_chars))
    parts.append(f"Question: {question}")
    if reasoning:
        parts.append("Reasoning: " + " ".join(reasoning))
    user = "\n\n".join(parts) + "\nAnswer:"
    return Prompt(ANSWER_SYSTEM, user, max_new_tokens, Purpose.ANSWER)


def reason_prompt(
    question: str,
    passages: Sequence[Passage],
    reasoning: Sequence[str],
    max_chars: int,
    max_new_tokens: int,
) -> Prompt:
    """IRCoT: write the next sentence of the chain of thought."""
    so_far = " ".join(reasoning) if reasoning else "(none yet)"
    user = (
        f"Passages:\n{format_passages(passages, max_chars)}\n\nQuestion: {question}\n"
        f"Reasoning so far: {so_far}\nNext sentence:"
    )
    return Prompt(REASON_SYSTEM, user, max_new_tokens, Purpose.REASON)


def grade_prompt(question: str, passage: Passage, max_chars: int, max_new_tokens: int) -> Prompt:
    """CRAG: is this one passage relevant to the question?"""
    user = (
        f"Question: {question}\nPassage: {passage.title}: {clip(passage.text, max_chars)}\n"
        "Does the passage help answer the question? Reply yes or no."
    )
    return Prompt(GRADE_SYSTEM, user, max_new_tokens, Purpose.GRADE)


def rewrite_prompt(question: str, max_new_tokens: int, tried: Sequence[str] = ()) -> Prompt:
    """CRAG, Self-RAG: the question rewritten as a search query; Self-RAG names the queries
    already tried, so that a second rewrite need not repeat the first."""
    user = f"Question: {question}\n"
    if tried:
        user += "Queries already tried: " + "; ".join(tried) + "\n"
    return Prompt(REWRITE_SYSTEM, user + "Query:", max_new_tokens, Purpose.REWRITE)


def grounded_prompt(
    question: str, passages: Sequence[Passage], answer: str, max_chars: int, max_new_tokens: int
) -> Prompt:
    """Self-RAG: is the answer supported by the kept passages?"""
    user = (
        f"Passages:\n{format_passages(passages, max_chars)}\n\nQuestion: {question}\n"
        f"Answer: {answer}\nIs the answer supported by the passages? Reply yes or no."
    )
    return Prompt(GROUNDED_SYSTEM, user, max_new_tokens, Purpose.GROUNDED)


def answers_prompt(question: str, answer: str, max_new_tokens: int) -> Prompt:
    """Self-RAG: does the answer answer the question?"""
    user = (
        f"Question: {question}\nAnswer: {answer}\n"
        "Does the answer answer the question? Reply yes or no."
    )
    return Prompt(ANSWERS_SYSTEM, user, max_new_tokens, Purpose.ANSWERS)


def route_prompt(
    template: str, question: str, max_new_tokens: int, index_summary: str | None = None
) -> Prompt:
    """Adaptive-RAG: the configured routing prompt for one question (and, for the index
    router, the summary of what the index holds in place of {index_summary})."""
    user = template
    if index_summary is not None:
        user = user.replace("{index_summary}", index_summary)
    return Prompt(ROUTE_SYSTEM, user.replace("{question}", question), max_new_tokens, Purpose.ROUTE)


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def clean_answer(text: str) -> str:
    """A short answer from a reply: its first line, without prefixes, quotes or a final period."""
    line = _TOOL_TAG.sub(" ", first_line(text))
    line = _ANSWER_PREFIX.sub("", line).strip()
    line = line.strip("\"'*` ").rstrip(".").strip()
    return line[:MAX_ANSWER_CHARS] or UNKNOWN


def clean_query(text: str, max_chars: int) -> str:
    """A search query from a reply: its first line without a "Query:" prefix, cut to size."""
    line = _TOOL_TAG.sub(" ", first_line(text))
    line = re.sub(r"^query\s*:\s*", "", line, flags=re.IGNORECASE).strip().strip("\"'")
    return line[:max_chars].strip()


@dataclass(frozen=True)
class ReasoningStep:
    """One IRCoT sentence, and the answer when it states one."""

    sentence: str
    answer: str | None


def read_reasoning(text: str) -> ReasoningStep:
    """The first sentence of a reply; an answer when the reply's first line says
    "So the answer is:" or "The answer is:" (what follows is the answer)."""
    line = _TOOL_TAG.sub(" ", first_line(text))
    final = _FINAL.search(line)
    if final:
        return ReasoningStep(line[: final.end()].strip(), clean_answer(line[final.end() :]))
    sentence = _SENTENCE_END.split(line, maxsplit=1)[0].strip()
    return ReasoningStep(sentence, None)


def is_relevant(reply: str) -> bool:
    """A grade reply means relevant when its first word is yes or relevant."""
    words = re.findall(r"[a-z]+", reply.lower())
    return bool(words) and words[0] in ("yes", "relevant")


def is_yes(reply: str) -> bool:
    """A check's reply (grounded, answers) passes when its first word is yes."""
    words = re.findall(r"[a-z]+", reply.lower())
    return bool(words) and words[0] == "yes"


def read_route_letter(reply: str) -> str | None:
    """The first standalone A, B or C in a routing reply, or None."""
    match = _ROUTE_LETTER.search(reply)
    return match.group(1) if match else None
