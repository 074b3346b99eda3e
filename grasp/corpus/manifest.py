"""The index manifest: what an index directory holds, what built it, and checks on loading.

``manifest.json`` is written last and atomically, so a directory with a manifest holds a
complete build. Loading checks the manifest's own fields (``schema_problem``: types of every
field, down to each file entry), that every file the index reads is listed, every listed
file's size and checksum, and that the manifest matches the configuration asking for it;
any difference is an error that names the file or the field, never a silently wrong answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import re
from collections.abc import Mapping
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


class ManifestError(IndexCorruptError):
    """``manifest.json`` does not hold what a manifest must; the message names the field.

    An IndexCorruptError, so that whoever handles a damaged index (``build_index`` rebuilds
    it, scripts report it) handles an edited manifest the same way.
    """


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

    def __post_init__(self) -> None:
        problem = schema_problem(dataclasses.asdict(self))
        if problem is not None:
            raise ManifestError(f"not a valid index manifest: {problem}")

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
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ManifestError(f"{path} is not a valid index manifest: {error}") from error
        version = data.get("format_version", FORMAT_VERSION) if isinstance(data, dict) else None
        if isinstance(version, int) and version != FORMAT_VERSION:
            raise IndexMismatchError(
                f"{path}: index format {version}, this code reads {FORMAT_VERSION}; "
                "rebuild the index"
            )
        problem = _fields_problem(data) or schema_problem(data)
        if problem is not None:
            raise ManifestError(
                f"{path} is not a valid index manifest: {problem}; rebuild the index"
            )
        return cls(**data)

    def require_files(self, directory: Path, needed: list[str]) -> None:
        """Raise ManifestError naming the first of ``needed`` that ``files`` does not list.

        A file without an entry would be read without any check of its size or checksum.
        """
        for relative in needed:
            if relative not in self.files:
                raise ManifestError(
                    f"{directory / MANIFEST_FILE}: files has no entry for {relative}, which "
                    "the index reads (so it cannot be checked): rebuild the index"
                )

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

    def check_config(self, requested: Mapping[str, Any]) -> None:
        """Raise IndexMismatchError naming the first field where ``requested`` differs."""
        for name, value in _flatten(requested).items():
            built = _flatten(self.config).get(name, "<absent>")
            if built != value:
                raise IndexMismatchError(
                    f"index was built with {name}={built!r} but the configuration asks for "
                    f"{name}={value!r}; rebuild it or point to a matching index"
                )


_REQUIRED = ("build_key", "config", "corpus", "dimension", "files")
_GRANULARITIES = ("sentence", "paragraph")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _fields_problem(data: Any) -> str | None:
    """What is wrong with the top-level keys of a manifest's JSON, or None."""
    if not isinstance(data, dict):
        return f"expected a JSON object, found {_kind(data)}"
    names = {item.name for item in dataclasses.fields(Manifest)}
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        return f"field {missing[0]} is missing"
    unknown = sorted(set(data) - names)
    if unknown:
        return f"field {unknown[0]} is not a manifest field"
    return None


def schema_problem(data: dict[str, Any]) -> str | None:
    """What in a manifest's fields does not have the type it must, naming the field; or None.

    Every field is checked, down to each ``files`` entry, so that a hand-edited manifest
    fails here, naming the field, not later as an AttributeError or KeyError, and never
    passes a check it should fail (a ``bytes`` of "42738" equals no file size).
    """
    checks = (
        _typed("build_key", data.get("build_key"), str),
        _config_problem(data.get("config")),
        _corpus_problem(data.get("corpus")),
        _count("dimension", data.get("dimension"), minimum=1),
        _files_problem(data.get("files")),
        _mapping_problem("versions", data.get("versions", {}), (str,)),
        _mapping_problem("timings", data.get("timings", {}), (int, float)),
        _count("format_version", data.get("format_version", FORMAT_VERSION), minimum=1),
    )
    return next((problem for problem in checks if problem is not None), None)


def _config_problem(config: Any) -> str | None:
    if not isinstance(config, dict):
        return f"field config must be a mapping, found {_kind(config)}"
    granularities = config.get("granularities")
    if granularities is None:
        return "field config.granularities is missing"
    if (
        not isinstance(granularities, list)
        or not granularities
        or any(g not in _GRANULARITIES for g in granularities)
    ):
        return (
            "field config.granularities must be a non-empty list of "
            f"{' / '.join(_GRANULARITIES)}, found {granularities!r}"
        )
    for name in ("encoder", "dense", "bm25"):
        if not isinstance(config.get(name), dict):
            return f"field config.{name} must be a mapping, found {_kind(config.get(name))}"
    return _typed("config.prepend_title", config.get("prepend_title"), bool)


def _corpus_problem(corpus: Any) -> str | None:
    if not isinstance(corpus, dict):
        return f"field corpus must be a mapping, found {_kind(corpus)}"
    problem = _typed("corpus.fingerprint", corpus.get("fingerprint"), str)
    for name in ("num_sentences", "num_paragraphs", "num_questions"):
        problem = problem or _count(f"corpus.{name}", corpus.get(name), minimum=0)
    if problem is None and not isinstance(corpus.get("source", {}), dict):
        problem = f"field corpus.source must be a mapping, found {_kind(corpus['source'])}"
    return problem


def _files_problem(files: Any) -> str | None:
    if not isinstance(files, dict):
        return (
            "field files must be a mapping of relative path -> {bytes, sha256}, "
            f"found {_kind(files)}"
        )
    for relative, entry in files.items():
        where = f"files[{relative!r}]"
        if not isinstance(entry, dict):
            return f"field {where} must be a mapping {{bytes, sha256}}, found {_kind(entry)}"
        problem = _count(f"{where}.bytes", entry.get("bytes"), minimum=0)
        sha256 = entry.get("sha256")
        if problem is None and not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
            problem = f"field {where}.sha256 must be 64 lower-case hex digits, found {sha256!r}"
        if problem is not None:
            return problem
    return None


def _mapping_problem(name: str, mapping: Any, value_types: tuple[type, ...]) -> str | None:
    if not isinstance(mapping, dict):
        return f"field {name} must be a mapping, found {_kind(mapping)}"
    for key, value in mapping.items():
        if isinstance(value, bool) or not isinstance(value, value_types):
            kinds = " or ".join(t.__name__ for t in value_types)
            return f"field {name}[{key!r}] must be {kinds}, found {_kind(value)} {value!r}"
    return None


def _typed(name: str, value: Any, kind: type) -> str | None:
    if value is None:
        return f"field {name} is missing"
    if not isinstance(value, kind):
        return f"field {name} must be {kind.__name__}, found {_kind(value)} {value!r}"
    return None


def _count(name: str, value: Any, minimum: int) -> str | None:
    """An int (not a bool, not a numeric string) of at least ``minimum``."""
    if value is None:
        return f"field {name} is missing"
    if isinstance(value, bool) or not isinstance(value, int):
        return f"field {name} must be an integer, found {_kind(value)} {value!r}"
    if value < minimum:
        return f"field {name} must be at least {minimum}, found {value}"
    return None


def _kind(value: Any) -> str:
    """A JSON type name for messages."""
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    """The hex SHA-256 of a file's bytes, read ``chunk`` bytes at a time."""
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


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = list(value) if isinstance(value, tuple) else value
    return flat
