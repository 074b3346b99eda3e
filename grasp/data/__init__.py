"""The data-loading layer: every benchmark, from any source, as a list of ``Question``.

Three sources give the same ``grasp.types.Question`` objects:

- ``normalized``: grasp's JSON Lines schema, e.g. the bundled ``data/<dataset>/dev.jsonl``;
- ``raw``: an official release file (HotpotQA/2Wiki json, MuSiQue jsonl);
- ``hub``: the Hugging Face hub copies (needs a network).

Usage::

    from grasp.data import DataSource, load_questions, sample_questions
    questions = load_questions("hotpotqa", DataSource.NORMALIZED)   # data/hotpotqa/dev.jsonl
    raw = load_questions("musique", "raw", path="musique_ans_v1.0_dev.jsonl")
    evaluation = sample_questions(questions, n=500, seed=42)
"""

from __future__ import annotations

import errno
from pathlib import Path

from grasp.data.errors import DataFormatError, HubUnavailableError, RecordContext
from grasp.data.hub import (
    HUB_SOURCES,
    hotpotqa_from_hub,
    load_from_hub,
    musique_from_hub,
    twowiki_from_hub,
)
from grasp.data.normalized import (
    load_normalized,
    question_from_dict,
    question_to_dict,
    write_normalized,
)
from grasp.data.raw_formats import (
    OFFICIAL_FILE_NAMES,
    hotpotqa_question,
    load_raw,
    musique_question,
    twowiki_question,
)
from grasp.data.sampling import (
    PAPER_SAMPLE_SIZE,
    PAPER_SEED,
    TrainEvalSplit,
    sample_questions,
    split_train_eval,
)
from grasp.data.sentences import split_sentences
from grasp.paths import REPO_ROOT
from grasp.types import DatasetName, Question, StrEnum

__all__ = [
    "HUB_SOURCES",
    "OFFICIAL_FILE_NAMES",
    "PAPER_SAMPLE_SIZE",
    "PAPER_SEED",
    "REPO_ROOT",
    "DataFormatError",
    "DataSource",
    "HubUnavailableError",
    "RecordContext",
    "TrainEvalSplit",
    "default_normalized_path",
    "hotpotqa_from_hub",
    "hotpotqa_question",
    "load_from_hub",
    "load_normalized",
    "load_questions",
    "load_raw",
    "musique_from_hub",
    "musique_question",
    "question_from_dict",
    "question_to_dict",
    "sample_questions",
    "split_sentences",
    "split_train_eval",
    "twowiki_from_hub",
    "twowiki_question",
    "write_normalized",
]

"""The repository root (``grasp/data/__init__.py`` is two levels below it)."""


class DataSource(StrEnum):
    """Where ``load_questions`` reads a benchmark from."""

    NORMALIZED = "normalized"
    """grasp's JSON Lines schema (the bundled files by default)."""
    RAW = "raw"
    """An official release file; needs ``path``."""
    HUB = "hub"
    """The Hugging Face hub copy; needs a network."""


def default_normalized_path(
    dataset: DatasetName | str, split: str = "dev", root: str | Path | None = None
) -> Path:
    """``<root>/<dataset>/<split>.jsonl``; ``root`` defaults to ``<repo root>/data``, where
    the bundled files live. The one definition of where a split's questions are."""
    base = Path(root) if root else REPO_ROOT / "data"
    return base / str(DatasetName(dataset)) / f"{split}.jsonl"


def _resolve(path: str | Path) -> Path:
    """``path`` as given when it exists (absolute, or relative to the working directory);
    otherwise relative to the repository root when it exists there, so that
    ``data/hotpotqa/dev.jsonl`` works from any directory."""
    path = Path(path)
    if path.exists() or path.is_absolute() or not (REPO_ROOT / path).exists():
        return path
    return REPO_ROOT / path


def _load_default_normalized(dataset: DatasetName, split: str) -> list[Question]:
    """The bundled normalized file of ``dataset``/``split``, with a helpful error if absent."""
    path = default_normalized_path(dataset, split)
    if not path.is_file():
        raise FileNotFoundError(
            errno.ENOENT,
            f"no normalized {dataset} {split} file. The repository bundles dev splits only; "
            f"for another split, convert an official file (source=raw path=...) or fetch it "
            f"(source=hub) and save it with grasp.data.write_normalized to",
            str(path),
        )
    return load_normalized(path)


def load_questions(
    dataset: DatasetName | str,
    source: DataSource | str = DataSource.NORMALIZED,
    path: str | Path | None = None,
    split: str = "dev",
) -> list[Question]:
    """Load every question of ``dataset`` from ``source``, in source order.

    Args:
        dataset: which benchmark.
        source: ``normalized`` (default), ``raw`` or ``hub``.
        path: the file to read. For ``normalized`` it defaults to ``data/<dataset>/<split>.jsonl``
            under the repository root; ``raw`` requires it; ``hub`` takes none. Relative
            paths are tried from the working directory, then from the repository root.
        split: the split, for the default normalized path and for the hub.

    Raises:
        FileNotFoundError: the file does not exist (the message names it).
        DataFormatError: the file is malformed, or holds questions of another dataset.
        HubUnavailableError: ``source=hub`` and the hub cannot be reached.
        ValueError: an unknown dataset or source, or ``path`` missing/unexpected.
    """
    dataset = DatasetName(dataset)
    source = DataSource(source)
    if source is DataSource.HUB:
        if path is not None:
            raise ValueError("source=hub reads from the Hugging Face hub and takes no path")
        return load_from_hub(dataset, split)
    if source is DataSource.RAW:
        if path is None:
            raise ValueError(
                f"source=raw needs path= the official {dataset} file "
                f"(e.g. {OFFICIAL_FILE_NAMES[dataset]})"
            )
        return load_raw(_resolve(path), dataset)
    if path is None:
        questions = _load_default_normalized(dataset, split)
        path = default_normalized_path(dataset, split)
    else:
        path = _resolve(path)
        questions = load_normalized(path)
    for position, question in enumerate(questions):
        if question.dataset is not dataset:
            raise DataFormatError(
                path,
                f"question {question.question_id!r} is from {question.dataset}, not {dataset}",
                record=position,
                field="dataset",
            )
    return questions
