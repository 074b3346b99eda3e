"""The trajectory samples of a training run say which weights played them (issue 14 item 20)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from grasp.rollout.scripted import tool_call_text
from grasp.train.callbacks import TrajectorySampleCallback
from grasp.train.run_folder import WEIGHTS_STEP_KEY
from grasp.train.trl_bridge import sample_weights_step


def test_a_sample_records_the_weights_that_played_it(scripted_trainer, tmp_path):
    trainer = scripted_trainer(tmp_path, lambda r: tool_call_text("answer", answer="Auckland"))
    [callback] = [
        c for c in trainer.callback_handler.callbacks if isinstance(c, TrajectorySampleCallback)
    ]
    trainer.state.global_step = 3
    callback.sample(3)
    lines = (tmp_path / "trajectories" / "step_000003.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert records and all(r["extra"][WEIGHTS_STEP_KEY] == 3 for r in records)

    # The report names the weights when they are not the step's own (a vLLM sample).
    from grasp.report.load import load_run

    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 3, "loss": 0.0}) + "\n")
    assert [s.label for s in load_run(tmp_path).samples] == ["sample at step 3"]
    for record in records:
        record["extra"][WEIGHTS_STEP_KEY] = 2
    text = "".join(json.dumps(r) + "\n" for r in records)
    (tmp_path / "trajectories" / "step_000003.jsonl").write_text(text)
    labels = [s.label for s in load_run(tmp_path).samples]
    assert labels == ["sample at step 3 (weights of step 2)"]


def test_vllm_samples_show_the_weights_last_pushed_to_vllm():
    # At the end of step 5, TRL last pushed weights before step 5's generation (global step 4).
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=5), _last_loaded_step=4)
    assert sample_weights_step(trainer, use_vllm=True) == 4
    assert sample_weights_step(trainer, use_vllm=False) == 5  # transformers: its own model
    never_pushed = SimpleNamespace(state=SimpleNamespace(global_step=5), _last_loaded_step=-1)
    assert sample_weights_step(never_pushed, use_vllm=True) is None
    assert sample_weights_step(SimpleNamespace(state=never_pushed.state), use_vllm=True) is None
