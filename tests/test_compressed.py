"""grasp.compressed: a finished JSON Lines file stored as .xz reads as the plain one, and goes
back to plain (losing nothing) when a run must append to it."""

from __future__ import annotations

import lzma
import re
from pathlib import Path

import pytest

from grasp.compressed import (
    CompressedFileError,
    compress,
    decompress,
    read_bytes,
    read_text,
    stored_path,
)

TEXT = '{"episode_id": "q1#0", "answer": "Ä \\u202e"}\n{"episode_id": "q2#0"}\n'


def test_compress_stores_xz_that_reads_back_as_the_plain_text(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    path.write_text(TEXT)
    packed = compress(path)
    assert packed == tmp_path / "trajectories.jsonl.xz"
    assert not path.exists() and stored_path(path) == packed
    assert lzma.decompress(packed.read_bytes()).decode() == TEXT
    assert read_text(path) == TEXT and read_text(packed) == TEXT
    assert [p.name for p in tmp_path.iterdir()] == ["trajectories.jsonl.xz"]  # no partial left


def test_decompress_restores_the_plain_file_and_leaves_a_plain_one_alone(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    path.write_text(TEXT)
    compress(path)
    assert decompress(path) == path
    assert path.read_text() == TEXT and stored_path(path) == path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trajectories.jsonl"]
    path.write_text(TEXT + "{}\n")
    decompress(path)
    assert path.read_text() == TEXT + "{}\n"


def test_neither_form_is_none_and_both_forms_are_refused_naming_both(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    assert stored_path(path) is None
    with pytest.raises(FileNotFoundError, match="trajectories.jsonl.xz"):
        read_text(path)
    path.write_text(TEXT)
    (tmp_path / "trajectories.jsonl.xz").write_bytes(lzma.compress(b"{}\n"))
    with pytest.raises(ValueError, match=r"trajectories.jsonl exists both plain and compressed"):
        read_text(path)


def _lines(count: int) -> str:
    return "".join(f'{{"episode_id": "q{i}#0"}}\n' for i in range(count))


def test_compress_refuses_to_write_over_a_stored_form_naming_both_and_their_records(tmp_path):
    """Issue 48 item 3: with trajectories.jsonl.xz (485 records) and trajectories.jsonl (100)
    in one folder, compress wrote the plain file over the .xz: 385 trajectories lost."""
    path = tmp_path / "trajectories.jsonl"
    path.write_text(_lines(100))
    packed = tmp_path / "trajectories.jsonl.xz"
    packed.write_bytes(lzma.compress(_lines(485).encode()))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    message = (
        f"{path} (100 records) and {packed} (485 records) both exist: compressing would replace "
        "the stored records with the plain ones"
    )
    with pytest.raises(FileExistsError, match=re.escape(message)):
        compress(path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_plain_file_that_cannot_be_removed_is_left_alone_as_the_only_form(tmp_path, monkeypatch):
    """Issue 48 (minor): the .xz was written, then removing the plain file raised
    PermissionError, leaving both forms (which every reader refuses)."""
    path = tmp_path / "trajectories.jsonl"
    path.write_text(TEXT)
    unlink = Path.unlink

    def refuse_plain(self, missing_ok=False):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse_plain)
    with pytest.raises(PermissionError, match=re.escape(f"{path}: cannot remove it")):
        compress(path)
    assert [p.name for p in tmp_path.iterdir()] == ["trajectories.jsonl"]
    assert path.read_text() == TEXT and stored_path(path) == path


@pytest.mark.parametrize("damage", ["truncated", "not_xz"])
def test_an_unreadable_xz_is_named_by_every_reader(tmp_path, damage):
    """Issue 48 (minor): a truncated or corrupt .xz raised a bare LZMAError (scripts/compare.py,
    the report), which named no file."""
    path = tmp_path / "trajectories.jsonl"
    packed = tmp_path / "trajectories.jsonl.xz"
    data = lzma.compress(TEXT.encode())
    packed.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"not xz at all")
    for read in (read_text, read_bytes, decompress):
        with pytest.raises(CompressedFileError, match=re.escape(f"{packed}: not a readable xz")):
            read(path)
    assert [p.name for p in tmp_path.iterdir()] == ["trajectories.jsonl.xz"]
