"""The index manifest: what an index directory holds, what built it, and checks on loading.

``manifest.json`` is written last and atomically, so a directory with a manifest holds a
complete build. Loading checks every listed file's size and checksum, and that the
manifest matches the configuration asking for it; any difference is an error that names
the file or the field, never a silently wrong answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1
_VERSIONED_PACKAGES = (
    "grasp",
    "faiss-cpu",
    "bm25s",
    "sentence-transformers",
    "transformers",
    "torch",
    "numpy",
    "pyarrow",
)


class IndexDirectoryError(RuntimeError):
    """Base class of index directory errors."""


class IndexMissingError(IndexDirectoryError, FileNotFoundError):
    """No complete index in the directory."""


class IndexCorruptError(IndexDirectoryError):
    """A file of the index is missing, truncated or changed since the build."""


class IndexMismatchError(IndexDirectoryError):
    """The index was built with a different configuration than the one asking for it."""


@dataclass
class Manifest:
    """Contents of ``manifest.json``."""

    build_key: str
    config: dict[str, Any]
    """The index configuration that built it (encoder, dense, bm25, granularities...)."""
    corpus: dict[str, Any]
    """Corpus fingerprint and counts, and where its questions came from."""
    dimension: int
    files: dict[str, dict[str, Any]]
    """Relative path -> {"bytes": int, "sha256": str}."""
    versions: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent in each build stage, e.g. ``sentence/encode``."""
    format_version: int = FORMAT_VERSION

    def write(self, directory: Path) -> Path:
        path = directory / MANIFEST_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True))
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, directory: Path) -> Manifest:
        path = directory / MANIFEST_FILE
        if not path.exists():
            hint = ""
            if directory.exists() and any(directory.iterdir()):
                hint = " It holds an unfinished build: run the same build command again to resume."
            raise IndexMissingError(
                f"no index at {directory} ({MANIFEST_FILE} missing).{hint} "
                "Build one with: python scripts/build_index.py dataset=hotpotqa split=dev"
            )
        try:
            data = json.loads(path.read_text())
            manifest = cls(**data)
        except (json.JSONDecodeError, TypeError) as error:
            raise IndexCorruptError(f"{path} is not a valid index manifest: {error}") from error
        if manifest.format_version != FORMAT_VERSION:
            raise IndexMismatchError(
                f"{path}: index format {manifest.format_version}, this code reads "
                f"{FORMAT_VERSION}; rebuild the index"
            )
        return manifest

    def verify_files(self, directory: Path, checksums: bool = True) -> None:
        """Raise IndexCorruptError naming the first file that is missing or changed."""
        for relative, expected in sorted(self.files.items()):
            path = directory / relative
            if not path.exists():
                raise IndexCorruptError(f"index file missing: {path}")
            size = path.stat().st_size
            if size != expected["bytes"]:
                raise IndexCorruptError(
                    f"index file {path} has {size} bytes, the manifest says "
                    f"{expected['bytes']} (truncated or replaced): rebuild the index"
                )
            if checksums and file_sha256(path) != expected["sha256"]:
                raise IndexCorruptError(
                    f"index file {path} does not match its checksum (corrupted): rebuild the index"
                )

    def check_config(self, requested: dict[str, Any]) -> None:
        """Raise IndexMismatchError naming the first field where ``requested`` differs."""
        for name, value in _flatten(requested).items():
            built = _flatten(self.config).get(name, "<absent>")
            if built != value:
                raise IndexMismatchError(
                    f"index was built with {name}={built!r} but the configuration asks for "
                    f"{name}={value!r}; rebuild it or point to a matching index"
                )


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def describe_files(directory: Path, paths: list[Path]) -> dict[str, dict[str, Any]]:
    """Manifest entries (size and checksum) for files inside ``directory``."""
    return {
        str(p.relative_to(directory)): {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
        for p in paths
    }


def library_versions() -> dict[str, str]:
    versions = {}
    for package in _VERSIONED_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def stable_hash(payload: Any) -> str:
    """Hex digest of a JSON-serializable value, independent of dict order."""
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = list(value) if isinstance(value, tuple) else value
    return flat
