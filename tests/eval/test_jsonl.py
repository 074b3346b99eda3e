"""Reading back an append-only JSON Lines file that an interrupted run may have torn."""

from __future__ import annotations

import json

import pytest

from grasp.eval.jsonl import end_last_line, read_appended


def _number(record):
    return int(record["n"])


def test_a_torn_last_line_is_cut_off_the_file(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"n": 1}\n{"n": 2}\n{"n": ')
    assert read_appended(path, _number, "a number", "delete it") == [1, 2]
    assert path.read_text() == '{"n": 1}\n{"n": 2}\n'


def test_a_whole_last_line_without_its_newline_is_kept_and_ended(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"n": 1}\n\n{"n": 2}')
    assert read_appended(path, _number, "a number", "delete it") == [1, 2]
    assert path.read_text() == '{"n": 1}\n\n{"n": 2}\n'


@pytest.mark.parametrize("bad", ['{"n": ', '{"m": 1}', "[1]", '{"n": "x"}', "\udcff"])
def test_a_bad_line_before_the_last_is_corruption_named_with_its_line(tmp_path, bad):
    path = tmp_path / "log.jsonl"
    text = f'{{"n": 1}}\n{bad}\n{{"n": 3}}\n'
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ValueError, match=r"log\.jsonl: line 2 is not a number .*: delete it$"):
        read_appended(path, _number, "a number", "delete it")
    assert path.read_bytes() == text.encode("utf-8", "surrogateescape")


def test_end_last_line_starts_the_next_append_on_a_line_of_its_own(tmp_path):
    path = tmp_path / "log.jsonl"
    end_last_line(path)  # no file: nothing to do
    assert not path.exists()
    path.write_text('{"n": 1}\n{"n"')
    end_last_line(path)
    end_last_line(path)  # already ended: unchanged
    with path.open("a") as handle:
        handle.write(json.dumps({"n": 3}) + "\n")
    assert path.read_text().splitlines() == ['{"n": 1}', '{"n"', '{"n": 3}']
