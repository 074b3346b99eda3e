"""metrics.jsonl after a run killed mid-write (issue 18 item 9)."""

from __future__ import annotations

import json

from grasp.train.callbacks import MetricsFileCallback
from grasp.train.metrics_log import read_metrics


class _State:
    is_world_process_zero = True

    def __init__(self, step: int) -> None:
        self.global_step = step


def test_a_torn_last_line_neither_merges_with_the_next_record_nor_breaks_reading(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": 0.5}) + "\n" + '{"step": 2, "lo')
    callback = MetricsFileCallback(tmp_path)  # the resumed run's logger
    callback.on_log(None, _State(2), None, logs={"loss": 0.25})
    lines = path.read_text().splitlines()
    assert lines[1] == '{"step": 2, "lo' and json.loads(lines[2]) == {"step": 2, "loss": 0.25}
    assert read_metrics(tmp_path) == [{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.25}]


def test_a_resumed_run_logs_each_step_once(tmp_path):
    path = tmp_path / "metrics.jsonl"
    killed = [{"step": s, "loss": s / 10} for s in range(1, 10)]  # checkpoint at 5, killed at 9
    path.write_text("".join(json.dumps(r) + "\n" for r in killed) + '{"step": 10, "lo')
    callback = MetricsFileCallback(tmp_path)
    callback.on_train_begin(None, _State(5), None)
    assert [json.loads(line) for line in path.read_text().splitlines()] == killed[:5]
    for step in range(6, 8):
        callback.on_log(None, _State(step), None, logs={"loss": 1.0})
    steps = [json.loads(line)["step"] for line in path.read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6, 7]
    callback.on_train_begin(None, _State(0), None)  # a fresh run keeps what is there
    assert len(path.read_text().splitlines()) == 7
