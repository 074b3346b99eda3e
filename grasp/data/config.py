"""Where a split's questions come from: ``DatasetConfig`` and the file it reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import MISSING

from grasp.data import DataSource, default_normalized_path, load_questions
from grasp.types import (
    DatasetName,
    Question,
    parse_enum,
)


@dataclass
class DatasetConfig:
    """Where a split's questions come from."""

    name: str = MISSING
    """hotpotqa, 2wikimultihopqa or musique."""
    source: str = "normalized"
    """normalized (our JSONL), raw (the official release file) or hub (Hugging Face)."""
    path: str | None = None
    """File to read; default for normalized: data/<name>/<split>.jsonl."""

    def __post_init__(self) -> None:
        self.name = parse_enum(DatasetName, self.name, "dataset.name")
        self.source = parse_enum(DataSource, self.source, "dataset.source")


def dataset_path(dataset: DatasetConfig, split: str) -> Path:
    """The file a dataset config reads: its ``path`` or the bundled default."""
    if dataset.path:
        return Path(dataset.path)
    return default_normalized_path(dataset.name, split)


def read_questions(
    dataset: DatasetConfig, split: str, data_dir: str | Path | None = None
) -> tuple[list[Question], Path | None]:
    """Every question of ``dataset``'s ``split`` and the file they came from (None: the hub):
    its ``path``, else for normalized data ``<data_dir or data/>/<name>/<split>.jsonl``. A
    missing or malformed file fails here, naming it."""
    path = Path(dataset.path) if dataset.path else None
    if path is None and dataset.source is DataSource.NORMALIZED:
        path = default_normalized_path(dataset.name, split, data_dir)
    return load_questions(dataset.name, dataset.source, path=path, split=split), path
