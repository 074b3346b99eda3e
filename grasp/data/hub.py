"""Load the benchmarks from the Hugging Face hub and convert their hub layouts to Questions.

Hub copies (``load_from_hub``):

- HotpotQA: ``hotpotqa/hotpot_qa``, config ``distractor``. Layout: ``id``, ``question``,
  ``answer``, ``type``, ``level``, ``supporting_facts: {"title": [...], "sent_id": [...]}``,
  ``context: {"title": [...], "sentences": [[...], ...]}``.
- 2WikiMultiHopQA: ``framolfese/2WikiMultihopQA`` (a parameter). The same column layout as
  HotpotQA's, with ``_id`` (or ``id``), ``evidences`` as parallel ``fact``/``relation``/``entity``
  columns, and the context sentences under ``sentences`` (or ``content`` in some copies).
- MuSiQue: ``dgslibisey/MuSiQue``, with the official MuSiQue fields.

Each ``*_from_hub`` converter takes one in-memory record (a dict, as iterating a
``datasets.Dataset`` gives), rewrites it into the official layout and hands it to the official
converter of :mod:`grasp.data.raw_formats`, so both paths give identical Questions.

Without a network (``HF_HUB_OFFLINE=1``, no route to the hub, or the repo is missing),
``load_from_hub`` raises :class:`HubUnavailableError` within seconds, naming the bundled copy
and the official file as alternatives.

Usage::

    from grasp.data.hub import load_from_hub
    questions = load_from_hub("musique", "dev")
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from grasp.data.errors import HubUnavailableError, RecordContext, UniqueIds
from grasp.data.raw_formats import (
    OFFICIAL_FILE_NAMES,
    hotpotqa_question,
    musique_question,
    twowiki_question,
)
from grasp.types import DatasetName, Question

__all__ = [
    "HUB_SOURCES",
    "HubSource",
    "hotpotqa_from_hub",
    "load_from_hub",
    "musique_from_hub",
    "twowiki_from_hub",
]


@dataclass(frozen=True)
class HubSource:
    """Where a dataset lives on the hub."""

    repo: str
    config: str | None = None


HUB_SOURCES: dict[DatasetName, HubSource] = {
    DatasetName.HOTPOTQA: HubSource("hotpotqa/hotpot_qa", "distractor"),
    DatasetName.TWOWIKI: HubSource("framolfese/2WikiMultihopQA"),
    DatasetName.MUSIQUE: HubSource("dgslibisey/MuSiQue"),
}

_HUB_SPLITS = {"dev": "validation"}
"""grasp calls the official dev sets ``dev``; the hub copies call them ``validation``."""

_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
_TRUE_VALUES = {"1", "true", "yes", "on"}
_PROBE_TIMEOUT_S = 3.0
"""Seconds to wait for a TCP connection to the hub before calling it unreachable."""


def _parallel(columns: list[Any]) -> bool:
    """Whether ``columns`` are lists of one common length."""
    return all(isinstance(c, list) for c in columns) and len({len(c) for c in columns}) <= 1


def _columns_to_rows(value: Any, keys: tuple[str, ...]) -> Any:
    """Parallel columns ``{k: [...] for k in keys}`` as rows ``[[v_k, ...], ...]``.

    Anything else (already rows, or malformed columns) is returned unchanged, for the official
    converter to accept or to reject with a message naming the field.
    """
    if not isinstance(value, Mapping) or not _parallel([value.get(k) for k in keys]):
        return value
    return [list(row) for row in zip(*(value[k] for k in keys), strict=True)]


def _columns_to_records(value: Any) -> Any:
    """Parallel columns ``{"a": [...], "b": [...]}`` as records ``[{"a": .., "b": ..}, ...]``.

    ``datasets`` hands back a list of structs either way, depending on the declared features.
    """
    if not isinstance(value, Mapping) or not _parallel(list(value.values())):
        return value
    keys = list(value)
    return [dict(zip(keys, row, strict=True)) for row in zip(*value.values(), strict=True)]


def _context_layout_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A HotpotQA/2Wiki hub record rewritten into the official list layout."""
    official = dict(record)
    if "_id" not in official and "id" in official:
        official["_id"] = official.pop("id")
    context = official.get("context")
    if isinstance(context, Mapping) and "sentences" not in context and "content" in context:
        context = {"title": context.get("title"), "sentences": context["content"]}
    official["context"] = _columns_to_rows(context, ("title", "sentences"))
    official["supporting_facts"] = _columns_to_rows(
        official.get("supporting_facts"), ("title", "sent_id")
    )
    return official


def hotpotqa_from_hub(record: Mapping[str, Any], ctx: RecordContext | None = None) -> Question:
    """Convert one ``hotpotqa/hotpot_qa`` record (hub column layout) to a Question."""
    return hotpotqa_question(_context_layout_record(record), ctx)


def twowiki_from_hub(record: Mapping[str, Any], ctx: RecordContext | None = None) -> Question:
    """Convert one ``framolfese/2WikiMultihopQA`` record (hub column layout) to a Question.

    ``evidences`` become official ``[[fact, relation, entity], ...]`` triples in ``meta``.
    """
    official = _context_layout_record(record)
    if "evidences" in official:
        official["evidences"] = _columns_to_rows(
            official["evidences"], ("fact", "relation", "entity")
        )
    return twowiki_question(official, ctx)


def musique_from_hub(record: Mapping[str, Any], ctx: RecordContext | None = None) -> Question:
    """Convert one ``dgslibisey/MuSiQue`` record (official fields) to a Question."""
    official = dict(record)
    for key in ("paragraphs", "question_decomposition"):
        if key in official:
            official[key] = _columns_to_records(official[key])
    return musique_question(official, ctx)


_HUB_CONVERTERS: dict[DatasetName, Callable[[Mapping[str, Any], RecordContext], Question]] = {
    DatasetName.HOTPOTQA: hotpotqa_from_hub,
    DatasetName.TWOWIKI: twowiki_from_hub,
    DatasetName.MUSIQUE: musique_from_hub,
}


def _unavailable(dataset: DatasetName, repo: str, reason: str) -> HubUnavailableError:
    """The error for an unreachable hub, naming the local alternatives."""
    return HubUnavailableError(
        f"cannot reach the Hugging Face hub for {repo} ({reason}). Use the bundled normalized "
        f"copy: source=normalized path=data/{dataset}/dev.jsonl (dev split), or the official "
        f"raw file: source=raw path=<your copy of {OFFICIAL_FILE_NAMES[dataset]}>"
    )


def _offline_variable() -> str | None:
    """The name of the offline switch that is set, if any."""
    for name in _OFFLINE_VARIABLES:
        if os.environ.get(name, "").strip().lower() in _TRUE_VALUES:
            return name
    return None


def _probe_hub(timeout_s: float) -> str | None:
    """None when a TCP connection to the hub endpoint opens within ``timeout_s``, else why not.

    ``datasets`` retries an unreachable hub with backoff for about half a minute; this probe
    fails fast instead.
    """
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as err:
        return f"no connection to {host}:{port}: {err}"


def load_from_hub(
    dataset: DatasetName | str,
    split: str = "dev",
    *,
    repo: str | None = None,
    config: str | None = None,
    probe_timeout_s: float = _PROBE_TIMEOUT_S,
) -> list[Question]:
    """Download ``split`` of ``dataset`` with ``datasets.load_dataset`` and convert it.

    Args:
        dataset: which benchmark.
        split: ``dev`` (mapped to the hub's ``validation``), ``train``, or a hub split name.
        repo: the hub repository; defaults to ``HUB_SOURCES[dataset].repo``.
        config: the dataset config; defaults to ``HUB_SOURCES[dataset].config`` when ``repo``
            is the default one, else None.
        probe_timeout_s: seconds to wait for a connection to the hub before giving up.

    Raises:
        HubUnavailableError: offline (``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE`` set and the
            data not in the local cache), the hub unreachable, or the repo not found.
        DataFormatError: a hub record does not have the expected layout.
    """
    dataset = DatasetName(dataset)
    source = HUB_SOURCES[dataset]
    if repo is None or repo == source.repo:
        repo, config = source.repo, config if config is not None else source.config
    offline = _offline_variable()
    import datasets  # deferred: importing datasets costs about a second

    if offline is not None and not datasets.config.HF_HUB_OFFLINE:
        # datasets reads the switch once, at import; set later it would still go online.
        raise _unavailable(dataset, repo, f"{offline} is set")
    if offline is None:
        reason = _probe_hub(probe_timeout_s)
        if reason is not None:
            raise _unavailable(dataset, repo, f"offline? {reason}")
    hub_split = _HUB_SPLITS.get(split, split)
    try:
        rows = datasets.load_dataset(repo, config, split=hub_split)
    except OSError as err:
        # ConnectionError, HTTP errors and DatasetNotFoundError all derive from OSError.
        raise _unavailable(dataset, repo, f"{type(err).__name__}: {err}") from err
    convert = _HUB_CONVERTERS[dataset]
    where = f"hub:{repo}/{hub_split}"
    questions = []
    ids = UniqueIds()
    for position, row in enumerate(rows):
        ctx = RecordContext(where, record=position)
        question = convert(row, ctx)
        ids.add(question.question_id, ctx)
        questions.append(question)
    return questions
