"""rollouts/process-<i>.jsonl: one record per rollout call, per process; a resumed run drops
the records of the steps after its checkpoint before it plays them again."""

from __future__ import annotations

import json
from types import SimpleNamespace

from grasp.train.run_folder import RunFolder
from grasp.train.trl_bridge import GraspRollout, TrainingPrompts


def trainer(process_index: int, global_step: int):
    return SimpleNamespace(
        accelerator=SimpleNamespace(process_index=process_index),
        state=SimpleNamespace(global_step=global_step),
        model=SimpleNamespace(training=True),
    )


def rollout(run_dir) -> GraspRollout:
    engine = SimpleNamespace(chat=object())  # _record uses neither engine nor policy
    prompts = TrainingPrompts([], {})
    folder = RunFolder(run_dir)
    return GraspRollout(engine, {}, prompts, lambda _: None, run_folder=folder)  # type: ignore[arg-type]


def played(*question_ids: str, group: int = 2):
    return [
        SimpleNamespace(question_id=q, group_id=number)
        for number, q in enumerate(question_ids)
        for _ in range(group)
    ]


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_call_appends_the_step_and_each_trajectorys_question_and_group(tmp_path):
    adapter = rollout(tmp_path)
    adapter._record(played("q-a", "q-b"), trainer(1, 0))
    adapter._record(played("q-c", "q-d"), trainer(1, 1))
    assert lines(tmp_path / "rollouts" / "process-1.jsonl") == [
        {
            "step": 1,
            "process_index": 1,
            "training": True,
            "question_ids": ["q-a", "q-a", "q-b", "q-b"],
            "group_ids": [0, 0, 1, 1],
        },
        {
            "step": 2,
            "process_index": 1,
            "training": True,
            "question_ids": ["q-c", "q-c", "q-d", "q-d"],
            "group_ids": [0, 0, 1, 1],
        },
    ]
    assert not (tmp_path / "rollouts" / "process-0.jsonl").exists()


def test_a_resumed_run_drops_the_records_of_the_steps_it_plays_again(tmp_path):
    killed = rollout(tmp_path)
    for step in range(3):  # steps 1, 2, 3 played; the checkpoint is at step 1
        killed._record(played(f"q-{step}"), trainer(0, step))
    resumed = rollout(tmp_path)
    resumed._record(played("q-again"), trainer(0, 1))
    records = lines(tmp_path / "rollouts" / "process-0.jsonl")
    assert [r["step"] for r in records] == [1, 2]
    assert records[1]["question_ids"] == ["q-again", "q-again"]
