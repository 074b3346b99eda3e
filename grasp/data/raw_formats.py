"""Convert the official release files of HotpotQA, 2WikiMultiHopQA and MuSiQue to Questions.

The official layouts:

- HotpotQA (``hotpot_dev_distractor_v1.json``): a JSON list of records with ``_id``,
  ``question``, ``answer``, ``type``, ``level``, ``supporting_facts`` as
  ``[[title, sent_id], ...]`` and ``context`` as ``[[title, [sentence, ...]], ...]``.
- 2WikiMultiHopQA (``dev.json``): the same shape, plus ``evidences`` and, in later releases,
  ``entity_ids``, ``evidences_id`` and ``answer_id``.
- MuSiQue (``musique_ans_v1.0_dev.jsonl``): JSON Lines with ``id``, ``paragraphs`` as
  ``[{idx, title, paragraph_text, is_supporting}, ...]``, ``question``, ``answer``,
  ``answer_aliases``, ``answerable`` and ``question_decomposition``.

The result is the same as the bundled normalized files: sentences stripped of surrounding
whitespace (empty ones kept so indices stay valid), ``is_supporting`` from the supporting-fact
titles (HotpotQA, 2Wiki) or the official flag (MuSiQue), MuSiQue paragraphs split with
:func:`grasp.data.sentences.split_sentences`, and every field without a place in
:class:`Question` kept in ``meta``.

Usage::

    from grasp.data.raw_formats import load_raw
    questions = load_raw("hotpot_dev_distractor_v1.json", "hotpotqa")
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grasp.data.errors import RecordContext, UniqueIds, no_questions
from grasp.data.json_files import json_document, json_lines
from grasp.data.sentences import split_sentences
from grasp.types import DatasetName, Paragraph, Question, SupportingFact

__all__ = [
    "OFFICIAL_FILE_NAMES",
    "hotpotqa_question",
    "load_raw",
    "musique_question",
    "twowiki_question",
]

OFFICIAL_FILE_NAMES: dict[DatasetName, str] = {
    DatasetName.HOTPOTQA: "hotpot_dev_distractor_v1.json",
    DatasetName.TWOWIKI: "dev.json",
    DatasetName.MUSIQUE: "musique_ans_v1.0_dev.jsonl",
}
"""The name of each dataset's official dev file, for messages that point users to it."""

# Fields of the HotpotQA/2Wiki layout that become Question fields; the rest goes to meta.
_CONTEXT_LAYOUT_FIELDS = frozenset(
    {"_id", "question", "answer", "type", "context", "supporting_facts"}
)
_MUSIQUE_FIELDS = frozenset({"id", "question", "answer", "answer_aliases", "paragraphs"})


def _context_paragraphs(ctx: RecordContext, value: Any) -> list[tuple[str, tuple[str, ...]]]:
    """The ``context`` field, ``[[title, [sentence, ...]], ...]``, with sentences stripped."""
    paragraphs = []
    for field, first, second in ctx.pairs(value, "context", "[title, sentences]"):
        title = ctx.check(first, str, f"{field}[0]")
        sentences = ctx.strings(second, f"{field}[1]")
        # Official HotpotQA sentences after the first begin with a space; the schema strips it.
        paragraphs.append((title, tuple(s.strip() for s in sentences)))
    return paragraphs


def _context_facts(ctx: RecordContext, value: Any) -> list[tuple[str, int]]:
    """The ``supporting_facts`` field, ``[[title, sent_id], ...]``."""
    facts = []
    for field, first, second in ctx.pairs(value, "supporting_facts", "[title, sent_id]"):
        facts.append((ctx.check(first, str, f"{field}[0]"), ctx.check(second, int, f"{field}[1]")))
    return facts


def _context_layout_question(record: Any, dataset: DatasetName, ctx: RecordContext) -> Question:
    """A Question from the shared HotpotQA/2Wiki layout (``_id``, ``context``, ...)."""
    ctx.check(record, dict, "<record>")
    listed = ctx.nonempty(ctx.require(record, "context", list), "context", "paragraph")
    context = _context_paragraphs(ctx, listed)
    facts = _context_facts(ctx, ctx.require(record, "supporting_facts", list))
    gold_titles = {title for title, _ in facts}
    paragraphs = tuple(
        Paragraph(title, sentences, is_supporting=title in gold_titles)
        for title, sentences in context
    )
    first_position: dict[str, int] = {}
    for position, paragraph in enumerate(paragraphs):
        first_position.setdefault(paragraph.title, position)
    supporting = []
    for position, (title, sentence) in enumerate(facts):
        if title not in first_position:
            raise ctx.error(
                f"title {title!r} is not in the context (a fullwiki file? grasp needs the "
                "distractor setting, where the gold paragraphs are in the context)",
                f"supporting_facts[{position}][0]",
            )
        # -1 is the schema's "paragraph only" marker; official files use sentence ids >= 0.
        supporting.append(
            SupportingFact(title, first_position[title], None if sentence < 0 else sentence)
        )
    return Question(
        question_id=ctx.text(record, "_id"),
        dataset=dataset,
        question=ctx.text(record, "question"),
        answers=(ctx.text(record, "answer"),),
        type=ctx.require(record, "type", str),
        paragraphs=paragraphs,
        supporting_facts=tuple(supporting),
        meta={k: v for k, v in record.items() if k not in _CONTEXT_LAYOUT_FIELDS},
    )


def hotpotqa_question(record: Any, ctx: RecordContext | None = None) -> Question:
    """Convert one record of the official HotpotQA json (distractor setting) to a Question.

    ``meta`` keeps ``level`` and any other field the record has beyond the Question fields.
    """
    return _context_layout_question(record, DatasetName.HOTPOTQA, ctx or RecordContext("<record>"))


def twowiki_question(record: Any, ctx: RecordContext | None = None) -> Question:
    """Convert one record of the official 2WikiMultiHopQA json to a Question.

    ``meta`` keeps ``evidences``, ``entity_ids``, ``evidences_id``, ``answer_id`` (when present)
    and any other field beyond the Question fields.
    """
    return _context_layout_question(record, DatasetName.TWOWIKI, ctx or RecordContext("<record>"))


def _musique_paragraphs(ctx: RecordContext, value: Any) -> tuple[Paragraph, ...]:
    """MuSiQue ``paragraphs``, split into sentences; ``idx`` must equal the list position."""
    paragraphs = []
    for prefix, item in ctx.indexed_objects(value, "paragraphs"):
        text = ctx.require(item, "paragraph_text", str, prefix)
        paragraphs.append(
            Paragraph(
                title=ctx.require(item, "title", str, prefix),
                sentences=tuple(split_sentences(text)),
                is_supporting=ctx.require(item, "is_supporting", bool, prefix),
            )
        )
    return tuple(paragraphs)


def musique_question(record: Any, ctx: RecordContext | None = None) -> Question:
    """Convert one record of the official MuSiQue jsonl to a Question.

    Answers are the official answer then the aliases (exact repeats dropped). Supporting facts
    are paragraph-level (``sentence_index`` None), one per supporting paragraph, and ``type``
    is the hop pattern of the id prefix (``3hop1__...`` -> ``3hop1``). ``meta`` keeps
    ``question_decomposition``, ``answerable``, ``supporting_paragraph_indices`` (titles repeat
    in MuSiQue, so facts cannot be told apart by title) and any other extra field.
    """
    ctx = ctx or RecordContext("<record>")
    ctx.check(record, dict, "<record>")
    question_id = ctx.text(record, "id")
    hop_pattern, separator, _ = question_id.partition("__")
    if not separator or not hop_pattern:
        raise ctx.error(f"{question_id!r} has no hop-pattern prefix like '2hop__'", "id")
    aliases = ctx.strings(ctx.optional(record, "answer_aliases", list, []), "answer_aliases")
    for position, alias in enumerate(aliases):
        ctx.nonblank(alias, f"answer_aliases[{position}]")
    answers = tuple(dict.fromkeys((ctx.text(record, "answer"), *aliases)))
    listed = ctx.nonempty(ctx.require(record, "paragraphs", list), "paragraphs", "paragraph")
    paragraphs = _musique_paragraphs(ctx, listed)
    gold = [i for i, p in enumerate(paragraphs) if p.is_supporting]
    meta = {k: v for k, v in record.items() if k not in _MUSIQUE_FIELDS}
    meta["supporting_paragraph_indices"] = gold
    return Question(
        question_id=question_id,
        dataset=DatasetName.MUSIQUE,
        question=ctx.text(record, "question"),
        answers=answers,
        type=hop_pattern,
        paragraphs=paragraphs,
        supporting_facts=tuple(SupportingFact(paragraphs[i].title, i, None) for i in gold),
        meta=meta,
    )


_CONVERTERS: dict[DatasetName, Callable[[Any, RecordContext], Question]] = {
    DatasetName.HOTPOTQA: hotpotqa_question,
    DatasetName.TWOWIKI: twowiki_question,
    DatasetName.MUSIQUE: musique_question,
}


def _json_list(path: Path) -> Sequence[Any]:
    """The top-level JSON list of ``path`` (HotpotQA and 2Wiki ship one list per file)."""
    records = json_document(path)
    if not isinstance(records, list):
        raise RecordContext(str(path)).error(
            f"expected a JSON list of records, got {type(records).__name__}"
        )
    return records


def _load_jsonl(path: Path, convert: Callable[[Any, RecordContext], Question]) -> list[Question]:
    """Convert every non-blank line of a JSON Lines file."""
    questions = []
    ids = UniqueIds()
    for ctx, record in json_lines(path):
        question = convert(record, ctx)
        ids.add(question.question_id, ctx)
        questions.append(question)
    if not questions:
        raise no_questions(path, "the file is empty")
    return questions


def load_raw(path: str | Path, dataset: DatasetName | str) -> list[Question]:
    """Load an official release file of ``dataset`` (a JSON list, or JSON Lines for MuSiQue).

    Raises:
        FileNotFoundError: ``path`` does not exist (the message names it).
        IsADirectoryError: ``path`` is a directory.
        DataFormatError: the file or a record does not have the official layout, a record
            repeats an earlier record's id, or the file holds no record.
    """
    dataset = DatasetName(dataset)
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            errno.EISDIR,
            f"a directory, not an official {dataset} file (give the file itself, e.g. "
            f"{OFFICIAL_FILE_NAMES[dataset]})",
            str(path),
        )
    if not path.is_file():
        raise FileNotFoundError(errno.ENOENT, f"official {dataset} file not found", str(path))
    convert = _CONVERTERS[dataset]
    if dataset is DatasetName.MUSIQUE:
        return _load_jsonl(path, convert)
    questions = []
    ids = UniqueIds()
    for position, record in enumerate(_json_list(path)):
        ctx = RecordContext(str(path), record=position)
        question = convert(record, ctx)
        ids.add(question.question_id, ctx, "_id")
        questions.append(question)
    if not questions:
        raise no_questions(path, "an empty list")
    return questions
