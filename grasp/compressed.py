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

__all__ = ["XZ_SUFFIX", "compress", "decompress", "read_bytes", "read_text", "stored_path"]

XZ_SUFFIX = ".xz"
"""Suffix of the stored (compressed) form of a file."""
_PRESET = 9 | lzma.PRESET_EXTREME
"""Slowest and smallest xz setting: a file is compressed once and read many times."""


def _xz(path: Path) -> Path:
    return path.with_name(path.name + XZ_SUFFIX)


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
        return lzma.decompress(found.read_bytes())
    return found.read_bytes()


def read_text(path: Path) -> str:
    """``read_bytes`` decoded as UTF-8."""
    return read_bytes(path).decode("utf-8")


def compress(path: Path) -> Path:
    """Store ``path`` as ``path.xz`` (verified by reading it back) and remove ``path``."""
    path = Path(path)
    data = path.read_bytes()
    packed = _xz(path)
    partial = packed.with_name(packed.name + ".partial")
    partial.write_bytes(lzma.compress(data, preset=_PRESET))
    if lzma.decompress(partial.read_bytes()) != data:  # never lose the plain file on a bad write
        partial.unlink()
        raise OSError(f"{packed}: the compressed copy does not read back as {path.name}")
    partial.replace(packed)
    path.unlink()
    return packed


def decompress(path: Path) -> Path:
    """Make ``path`` the plain file again when only its ``.xz`` form is stored (so that a
    resumed run can append to it); returns ``path``. A plain file is left as it is."""
    path = Path(path)
    found = stored_path(path)
    if found is not None and found != path:
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(lzma.decompress(found.read_bytes()))
        partial.replace(path)
        found.unlink()
    return path
