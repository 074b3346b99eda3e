"""What is wrong with an index directory's path, before anything reads or builds there.

An index directory, or a folder above it, can be something other than a folder: a symlink
that leads back to itself, a symlink whose target is gone, or a file. ``mkdir`` then fails
with a bare ``FileExistsError`` and a loader reports "no index (manifest.json missing)",
neither naming the real fault. ``check_index_path`` names it, and the path at fault, for
``build_index`` (before any work) and ``CorpusIndex.load`` (the evaluation and the service)
alike. A path that does not exist yet is no fault: a build creates it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from grasp.corpus.manifest import IndexDirectoryError


class IndexPathError(IndexDirectoryError, NotADirectoryError):
    """The index directory, or a folder on its path, is not a folder (the message says what
    it is instead)."""


def index_path_problem(directory: Path) -> str | None:
    """What makes ``directory`` unusable as an index folder, naming the path at fault, or
    None when it is a folder or can be created.

    Each prefix of the path is checked from the top down, so the first one that is not a
    folder is named (the loop itself, not a path below it)."""
    directory = Path(directory)
    path = Path(directory.anchor)  # "/" (or "." for a relative path)
    parts = directory.parts[1:] if directory.anchor else directory.parts
    for part in parts:
        path = path / part
        try:
            mode = os.stat(path).st_mode
        except OSError as error:
            return _unreachable(path, directory, error)
        if not stat.S_ISDIR(mode):
            kind = "a file" if stat.S_ISREG(mode) else "a device, pipe or socket"
            return f"{_subject(path, directory)} is {kind}, not a folder; {_REMEDY}"
    return None


def check_index_path(directory: Path) -> None:
    """Raise IndexPathError saying what is wrong with ``directory`` (``index_path_problem``)."""
    problem = index_path_problem(directory)
    if problem is not None:
        raise IndexPathError(problem)


_REMEDY = "use a folder, or a path still to be created, as the index directory"


def _unreachable(path: Path, directory: Path, error: OSError) -> str | None:
    """The problem of a prefix ``path`` that ``os.stat`` could not follow, or None when it
    simply does not exist yet (nor does anything below it) or the error is another one (the
    code that opens it then reports it)."""
    if error.errno == errno.ELOOP:
        return (
            f"{_subject(path, directory)} is a symlink loop (following it leads back to it); "
            f"{_REMEDY}"
        )
    if error.errno == errno.ENOENT and path.is_symlink():
        target = os.readlink(path)
        return (
            f"{_subject(path, directory)} is a broken symlink (to {target}, which does not "
            f"exist); create its target or {_REMEDY}"
        )
    return None


def _subject(path: Path, directory: Path) -> str:
    """How a message names ``path``: the index directory itself, or a folder on its way."""
    if path == directory:
        return f"index directory {path}"
    return f"index directory {directory}: {path}"
