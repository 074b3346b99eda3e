"""Read and write grasp's normalized JSON Lines schema (one question per line).

The schema is described in ``data/README.md``; the bundled ``data/<dataset>/dev.jsonl`` files
use it. Loading validates every field and raises :class:`DataFormatError` naming the file,
line and field of the first problem; nothing is skipped silently. Writing produces the same
schema, so ``load -> write -> load`` gives equal questions (and, for the bundled files, the
same bytes).

Usage::

    from grasp.data.normalized import load_normalized, write_normalized
    questions = load_normalized("data/hotpotqa/dev.jsonl")
    write_normalized(questions[:10], "/tmp/hotpot10.jsonl")
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from grasp.data.errors import RecordContext, UniqueIds, no_questions
from grasp.data.json_files import json_lines
from grasp.types import DatasetName, Paragraph, Question, SupportingFact

__all__ = ["load_normalized", "question_from_dict", "question_to_dict", "write_normalized"]

_SUPPORTING_INDICES = "supporting_paragraph_indices"
"""The ``meta`` key that pins each supporting fact to a paragraph where titles repeat."""


def _paragraphs(ctx: RecordContext, value: Any) -> tuple[Paragraph, ...]:
    """The ``paragraphs`` field: objects with ``idx`` (its position), title, sentences, flag."""
    paragraphs = []
    for prefix, item in ctx.indexed_objects(value, "paragraphs"):
        paragraphs.append(
            Paragraph(
                title=ctx.require(item, "title", str, prefix),
                sentences=ctx.strings(
                    ctx.require(item, "sentences", list, prefix), prefix + "sentences"
                ),
                is_supporting=ctx.require(item, "is_supporting", bool, prefix),
            )
        )
    return tuple(paragraphs)


def _pinned_indices(
    ctx: RecordContext, meta: Mapping[str, Any], facts: Sequence[Any], count: int
) -> list[int] | None:
    """``meta.supporting_paragraph_indices`` (one per fact) when present, else None."""
    value = meta.get(_SUPPORTING_INDICES)
    if value is None:
        return None
    field = f"meta.{_SUPPORTING_INDICES}"
    indices = [
        ctx.check(i, int, f"{field}[{k}]") for k, i in enumerate(ctx.check(value, list, field))
    ]
    if len(indices) != len(facts):
        raise ctx.error(f"has {len(indices)} entries for {len(facts)} supporting facts", field)
    for k, index in enumerate(indices):
        if not 0 <= index < count:
            raise ctx.error(
                f"{index} is not a paragraph position (0..{count - 1})", f"{field}[{k}]"
            )
    return indices


def _title_index(paragraphs: Sequence[Paragraph], title: str) -> int | None:
    """Position of the paragraph titled ``title``: the first supporting one, else the first."""
    matches = [i for i, p in enumerate(paragraphs) if p.title == title]
    supporting = [i for i in matches if paragraphs[i].is_supporting]
    if supporting:
        return supporting[0]
    return matches[0] if matches else None


def _supporting_facts(
    ctx: RecordContext, value: Any, paragraphs: Sequence[Paragraph], meta: Mapping[str, Any]
) -> tuple[SupportingFact, ...]:
    """The ``supporting_facts`` field, ``[[title, sentence_index or -1], ...]``, resolved."""
    items = ctx.check(value, list, "supporting_facts")
    pinned = _pinned_indices(ctx, meta, items, len(paragraphs))
    facts = []
    for k, item in enumerate(items):
        field = f"supporting_facts[{k}]"
        pair = ctx.check(item, list, field)
        if len(pair) != 2:
            raise ctx.error(f"expected [title, sentence_index], got {len(pair)} items", field)
        title = ctx.check(pair[0], str, f"{field}[0]")
        sentence = ctx.check(pair[1], int, f"{field}[1]")
        if sentence < -1:
            raise ctx.error(f"sentence index {sentence} is below -1", f"{field}[1]")
        # The sentence index is not checked against the paragraph length: one official 2Wiki
        # question points past the end of its paragraph and is kept as the dataset has it.
        index = pinned[k] if pinned is not None else _title_index(paragraphs, title)
        if index is None:
            raise ctx.error(f"title {title!r} is not the title of any paragraph", f"{field}[0]")
        if paragraphs[index].title != title:
            raise ctx.error(
                f"title {title!r} differs from paragraph {index} ({paragraphs[index].title!r})",
                f"{field}[0]",
            )
        facts.append(SupportingFact(title, index, None if sentence == -1 else sentence))
    return tuple(facts)


def question_from_dict(record: Any, ctx: RecordContext | None = None) -> Question:
    """Convert one normalized-schema record (a parsed JSON object) to a :class:`Question`.

    Args:
        record: the parsed JSON object of one line.
        ctx: where the record came from, for error messages.

    Raises:
        DataFormatError: a field is missing or has the wrong type or value.
    """
    ctx = ctx or RecordContext("<record>")
    ctx.check(record, dict, "<record>")
    dataset_value = ctx.require(record, "dataset", str)
    try:
        dataset = DatasetName(dataset_value)
    except ValueError:
        known = ", ".join(d.value for d in DatasetName)
        raise ctx.error(f"unknown dataset {dataset_value!r} (known: {known})", "dataset") from None
    answers = ctx.strings(ctx.require(record, "answers", list), "answers")
    if not answers:
        raise ctx.error("must hold at least one answer", "answers")
    for position, answer in enumerate(answers):
        ctx.nonblank(answer, f"answers[{position}]")
    meta = ctx.optional(record, "meta", dict, {})
    listed = ctx.nonempty(ctx.require(record, "paragraphs", list), "paragraphs", "paragraph")
    paragraphs = _paragraphs(ctx, listed)
    return Question(
        question_id=ctx.text(record, "id"),
        dataset=dataset,
        question=ctx.text(record, "question"),
        answers=answers,
        type=ctx.require(record, "type", str),
        paragraphs=paragraphs,
        supporting_facts=_supporting_facts(
            ctx, ctx.require(record, "supporting_facts", list), paragraphs, meta
        ),
        meta=meta,
    )


def _meta_for_writing(question: Question) -> dict[str, Any]:
    """``question.meta``, with the supporting-paragraph pins added where titles are ambiguous.

    Titles alone cannot say which of two same-titled paragraphs a fact means (MuSiQue repeats
    titles). The pins are written whenever they are already there or titles would resolve a
    fact to another paragraph, so that loading the file gives back the same facts.
    """
    meta = dict(question.meta)
    resolved = [_title_index(question.paragraphs, f.title) for f in question.supporting_facts]
    actual = [f.paragraph_index for f in question.supporting_facts]
    if _SUPPORTING_INDICES in meta or resolved != actual:
        meta[_SUPPORTING_INDICES] = actual
    return meta


class NormalizedParagraph(TypedDict):
    idx: int
    title: str
    sentences: list[str]
    is_supporting: bool


class NormalizedRecord(TypedDict):
    """One question in the normalized schema (``question_to_dict``)."""

    id: str
    dataset: str
    question: str
    answers: list[str]
    type: str
    paragraphs: list[NormalizedParagraph]
    supporting_facts: list[list[str | int]]
    """[title, sentence index] pairs; -1: the paragraph as a whole."""
    meta: dict[str, Any]


def question_to_dict(question: Question) -> NormalizedRecord:
    """The normalized-schema record of ``question`` (the inverse of :func:`question_from_dict`)."""
    return {
        "id": question.question_id,
        "dataset": str(question.dataset),
        "question": question.question,
        "answers": list(question.answers),
        "type": question.type,
        "paragraphs": [
            {
                "idx": position,
                "title": paragraph.title,
                "sentences": list(paragraph.sentences),
                "is_supporting": paragraph.is_supporting,
            }
            for position, paragraph in enumerate(question.paragraphs)
        ],
        "supporting_facts": [
            [fact.title, -1 if fact.sentence_index is None else fact.sentence_index]
            for fact in question.supporting_facts
        ],
        "meta": _meta_for_writing(question),
    }


def load_normalized(path: str | Path) -> list[Question]:
    """Load a normalized JSON Lines file, one question per non-blank line, in file order.

    Raises:
        FileNotFoundError: ``path`` does not exist (the message names it).
        IsADirectoryError: ``path`` is a directory.
        DataFormatError: a line is not valid JSON, misses a field, has a wrong value, or
            repeats an earlier question id (the message names the file, line and field); or
            the file holds no question.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            errno.EISDIR,
            "a directory, not a normalized data file (give the .jsonl file)",
            str(path),
        )
    if not path.is_file():
        raise FileNotFoundError(errno.ENOENT, "normalized data file not found", str(path))
    questions: list[Question] = []
    ids = UniqueIds()
    for ctx, record in json_lines(path):
        question = question_from_dict(record, ctx)
        ids.add(question.question_id, ctx)
        questions.append(question)
    if not questions:
        raise no_questions(path, "the file is empty")
    return questions


def write_normalized(questions: Iterable[Question], path: str | Path) -> Path:
    """Write ``questions`` to ``path`` in the normalized schema (UTF-8, one JSON per line).

    Parent directories are created. Returns the path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for question in questions:
            # ensure_ascii=False keeps titles readable and matches the bundled files byte for byte.
            handle.write(json.dumps(question_to_dict(question), ensure_ascii=False) + "\n")
    return path
