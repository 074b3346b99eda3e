"""Finished JSON Lines files stored xz-compressed, and read in either form.

An evaluation appends to ``trajectories.jsonl`` while it runs (a killed run loses at most
the line it was writing). Once finished and committed, the file is stored as
``trajectories.jsonl.xz``: trajectories compress about 9x, which keeps the repository small
enough to clone quickly and to copy to a GPU machine. Every reader of a trajectory file goes
through this module, so both forms read the same; a resumed evaluation turns the stored form
back into the plain one before it appends (``decompress``)::

    stored_path(folder / "trajectories.jsonl")   # the file that is there, either form
    read_text(folder / "trajectories.jsonl")     # its text, whichever form is stored
    compress(folder / "trajectories.jsonl")      # -> trajectories.jsonl.xz, plain one removed

``python scripts/compress_results.py results/`` compresses every finished trajectory file of
a results folder before it is committed.
"""

from __future__ import annotations

import lzma
from pathlib import Path

__all__ = [
    "XZ_SUFFIX",
    "CompressedFileError",
    "compress",
    "decompress",
    "read_bytes",
    "read_text",
    "stored_path",
]

XZ_SUFFIX = ".xz"
"""Suffix of the stored (compressed) form of a file."""
_PRESET = 9 | lzma.PRESET_EXTREME
"""Slowest and smallest xz setting: a file is compressed once and read many times."""


class CompressedFileError(lzma.LZMAError, ValueError):
    """A stored ``.xz`` file that does not decompress (truncated, or not xz): its path named.

    An LZMAError, as the bare one it replaces, and a ValueError: the data is bad, as a
    malformed line is, and the entry points end it in one line."""


def _xz(path: Path) -> Path:
    return path.with_name(path.name + XZ_SUFFIX)


def _unpacked(packed: Path) -> bytes:
    """The decompressed content of ``packed``, a ``.xz`` file; CompressedFileError names it."""
    try:
        return lzma.decompress(packed.read_bytes())
    except lzma.LZMAError as error:
        raise CompressedFileError(
            f"{packed}: not a readable xz file ({error}): restore it (git checkout, or its "
            "copy) or delete it"
        ) from None


def _records(data: bytes) -> int:
    """The JSON lines in ``data``: its non-blank lines."""
    return sum(1 for line in data.splitlines() if line.strip())


def stored_path(path: Path) -> Path | None:
    """``path`` if it exists, else its ``.xz`` form if that exists, else None.

    Raises:
        ValueError: both forms exist (which one holds the records would be a guess).
    """
    path = Path(path)
    plain, packed = path.is_file(), _xz(path).is_file()
    if plain and packed:
        raise ValueError(
            f"{path} exists both plain and compressed ({_xz(path).name}): keep the one that "
            f"holds every record and delete the other"
        )
    if plain:
        return path
    return _xz(path) if packed else None


def read_bytes(path: Path) -> bytes:
    """The content of ``path``, read from its ``.xz`` form where that is what is stored.

    Raises:
        FileNotFoundError: neither form exists.
    """
    found = stored_path(path)
    if found is None:
        raise FileNotFoundError(f"{path} (nor {_xz(Path(path)).name})")
    if found.suffix == XZ_SUFFIX:
        return _unpacked(found)
    return found.read_bytes()


def read_text(path: Path) -> str:
    """``read_bytes`` decoded as UTF-8."""
    return read_bytes(path).decode("utf-8")


def compress(path: Path) -> Path:
    """Store ``path`` as ``path.xz`` (verified by reading it back) and remove ``path``.

    Exactly one form is left whatever happens: a stored ``.xz`` already there is never
    replaced (FileExistsError naming both files and their records: which holds the run's
    records is for a person to say), and a plain file that cannot be removed stays the only
    form (its ``.xz`` is removed again)."""
    path = Path(path)
    data = path.read_bytes()
    packed = _xz(path)
    if packed.exists():
        stored = _records(_unpacked(packed))
        raise FileExistsError(
            f"{path} ({_records(data)} records) and {packed} ({stored} records) both exist: "
            "compressing would replace the stored records with the plain ones. Keep the one "
            "that holds every record and delete the other"
        )
    partial = packed.with_name(packed.name + ".partial")
    partial.write_bytes(lzma.compress(data, preset=_PRESET))
    if lzma.decompress(partial.read_bytes()) != data:  # never lose the plain file on a bad write
        partial.unlink()
        raise OSError(f"{packed}: the compressed copy does not read back as {path.name}")
    partial.replace(packed)
    try:
        path.unlink()
    except OSError as error:
        packed.unlink()
        raise type(error)(
            f"{path}: cannot remove it ({error.strerror or error}), so it stays as it was, "
            f"plain, and {packed.name} is not kept"
        ) from error
    return packed


def decompress(path: Path) -> Path:
    """Make ``path`` the plain file again when only its ``.xz`` form is stored (so that a
    resumed run can append to it); returns ``path``. A plain file is left as it is."""
    path = Path(path)
    found = stored_path(path)
    if found is not None and found != path:
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(_unpacked(found))
        partial.replace(path)
        found.unlink()
    return path
