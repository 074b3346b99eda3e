"""grasp.compressed: a finished JSON Lines file stored as .xz reads as the plain one, and goes
back to plain (losing nothing) when a run must append to it."""

from __future__ import annotations

import lzma

import pytest

from grasp.compressed import compress, decompress, read_text, stored_path

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
