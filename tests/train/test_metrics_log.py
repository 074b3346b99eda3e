"""metrics.jsonl after a run killed mid-write (issue 18 item 9)."""

from __future__ import annotations

import json

from grasp.train.callbacks import MetricsFileCallback
from grasp.train.metrics_log import read_metrics
from grasp.train.rollout_adapter import RolloutStats


class _State:
    is_world_process_zero = True

    def __init__(self, step: int) -> None:
        self.global_step = step


def test_a_torn_last_line_neither_merges_with_the_next_record_nor_breaks_reading(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": 0.5}) + "\n" + '{"step": 2, "lo')
    callback = MetricsFileCallback(tmp_path, RolloutStats())  # the resumed run's logger
    callback.on_log(None, _State(2), None, logs={"loss": 0.25})
    lines = path.read_text().splitlines()
    assert lines[1] == '{"step": 2, "lo' and json.loads(lines[2]) == {"step": 2, "loss": 0.25}
    assert read_metrics(tmp_path) == [{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.25}]
