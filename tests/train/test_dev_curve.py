"""The dev learning curve (grasp/train/dev_curve.py): the same held-out questions at every
evaluated step, one line per step rebuilt from the step folders, exact per-episode counts."""

from __future__ import annotations

import json
import re

import pytest

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.env.episode import TurnRecord
from grasp.eval.provenance import code_version
from grasp.reward import RewardConfig, compute_reward
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.scripted import HeuristicSearchPolicy
from grasp.rollout.trajectory import Trajectory
from grasp.train.config import DevCurveSettings, TrainConfig
from grasp.train.dev_curve import (
    DevCurve,
    DevCurveCallback,
    DevSet,
    curve_entry,
    dev_questions,
    reads,
)
from grasp.train.run_folder import DEV_CURVE_FILE
from grasp.types import EpisodeEvidence, StopReason


def _trajectory(episode_id: str, turns: list[TurnRecord], answer: str | None) -> Trajectory:
    evidence = EpisodeEvidence(
        answer=answer,
        gold_answers=("Paris",),
        gold_paragraph_ids=frozenset({1}),
        evidence_ids={"semantic": frozenset({1})},
        turns_used=len(turns),
        turn_budget=6,
    )
    return Trajectory(
        episode_id=episode_id,
        question_id=episode_id.split("#")[0],
        dataset="hotpotqa",
        group_id=0,
        sample_index=0,
        question="q?",
        gold_answers=["Paris"],
        gold_paragraph_ids=[1],
        turns=turns,
        stop_reason=StopReason.ANSWERED if answer else StopReason.TURN_BUDGET,
        answer=answer,
        turns_used=len(turns),
        turn_budget=6,
        evidence_ids={"semantic": [1], "keyword": [], "read": []},
        tool_calls={},
        errors={},
        reward=compute_reward(evidence, RewardConfig()),
    )


READ = {"name": "read_paragraph", "arguments": {"hit": 1}}


def test_reads_that_ran_are_counted_apart_from_refused_ones():
    ran = TurnRecord(text="", call=READ, observation="read_paragraph [1] T:\nx")
    refused = TurnRecord(text="", call=READ, error="invalid_call", observation="Error")
    search = TurnRecord(text="", call={"name": "semantic_search", "arguments": {"query": "q"}})
    one = _trajectory("a#0", [search, ran, refused, refused], "Paris")
    two = _trajectory("b#0", [search, ran], None)
    assert reads(one) == (1, 2) and reads(two) == (1, 0)
    entry = curve_entry([one, two], count=lambda text: len(text.split()))
    assert entry["episodes"] == 2
    assert entry["reads_run_per_episode"] == 1.0
    assert entry["reads_refused_per_episode"] == 1.0
    assert entry["answered"] == 0.5 and entry["em"] == 0.5
    assert entry["reward/R_N"] == -0.5  # one of two ended without an answer
    # Observation tokens: "read_paragraph [1] T: x" is 4 words, "Error" 1; per episode.
    assert entry["context_tokens"] == (4 + 1 + 1 + 4) / 2


def test_a_dev_question_that_is_also_a_training_question_is_refused():
    settings = DevCurveSettings(every=25, questions_per_dataset=3, datasets=["musique"])
    held_out, _ = dev_questions(settings, training=[])["musique"]
    with pytest.raises(ValueError, match=r"dev_curve: 1 musique dev questions are also training"):
        dev_questions(settings, training=[held_out[1]])


def _edit(text: str, how: str) -> str:
    words = text.split(" ")
    if how == "doubled_space":
        return " ".join(words[:2]) + "  " + " ".join(words[2:])
    if how == "punctuation":
        return text.rstrip("?") + " ?!"
    return "\t" + text.upper().replace(" ", "\n", 1)  # case and whitespace kinds


@pytest.mark.parametrize("how", ["doubled_space", "punctuation", "case_and_whitespace"])
def test_a_near_copy_of_a_dev_question_under_a_new_id_is_refused(how):
    """Issue 48 (minor): a dev question copied into training with a new id and one doubled
    space was trained on (ids and lower-cased text were compared)."""
    import dataclasses

    settings = DevCurveSettings(every=25, questions_per_dataset=3, datasets=["musique"])
    held_out, _ = dev_questions(settings, training=[])["musique"]
    copy = dataclasses.replace(
        held_out[2], question_id="copied-1", question=_edit(held_out[2].question, how)
    )
    assert copy.question.strip().lower() != held_out[2].question.strip().lower()
    message = (
        f"dev_curve: 1 musique dev questions are also training questions (e.g. "
        f"{held_out[2].question_id})"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        dev_questions(settings, training=[copy])
    other = dataclasses.replace(copy, question=held_out[2].question + " Which one?")
    assert dev_questions(settings, training=[other])["musique"][0] == held_out


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"every": -1}, "dev_curve.every must be >= 0"),
        ({"every": 5, "questions_per_dataset": 0}, "dev_curve.questions_per_dataset"),
        ({"every": 5, "datasets": ["hotpot"]}, "dev_curve.datasets"),
    ],
)
def test_a_bad_dev_curve_setting_is_refused_naming_the_field(override, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(dev_curve=DevCurveSettings(**override))


def test_the_curve_plays_the_same_questions_at_each_step_and_rebuilds_its_file(
    tiny_index, tiny_questions, tmp_path
):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, turn_budget=4, hit_labels="handles"))
    plan = ["semantic_search", "read_paragraph", "answer"]
    played = []

    def engine_for(environment, model):
        played.append(model)
        return RolloutEngine(environment, HeuristicSearchPolicy(plan=plan), RolloutConfig())

    sets = [
        DevSet("hotpotqa", list(tiny_questions[:2]), env),
        DevSet("musique", [tiny_questions[2]], env),
    ]
    curve = DevCurve(tmp_path, sets, engine_for, lambda text: len(text.split()), {"run": "t"})
    first = curve.evaluate(0, "warm start")
    curve.evaluate(25, "step 25")
    lines = [json.loads(line) for line in (tmp_path / DEV_CURVE_FILE).read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 25]
    assert lines[0] == first
    assert first["pooled"]["episodes"] == 3
    assert (first["hotpotqa"]["episodes"], first["musique"]["episodes"]) == (2, 1)
    assert first["pooled"]["reads_run_per_episode"] == 1.0  # every planned read ran
    for step in ("step_000000", "step_000025"):
        ids = [
            json.loads(line)["question_id"]
            for line in (tmp_path / "dev_curve" / step / "hotpotqa" / "trajectories.jsonl")
            .read_text()
            .splitlines()
        ]
        assert ids == [q.question_id for q in tiny_questions[:2]]
        # Each batch records the commit that played it, as the baseline table's evaluations do.
        log = tmp_path / "dev_curve" / step / "hotpotqa" / "rollout_log.jsonl"
        codes = [json.loads(line)["code"] for line in log.read_text().splitlines()]
        assert codes and all(code == code_version() for code in codes)
        assert set(codes[0]) == {"git_commit", "git_dirty"}  # recorded (null when it was not)
    assert curve.done(0) and curve.done(25) and not curve.done(50)
    assert played == ["warm start", "warm start", "step 25", "step 25"]
    curve.evaluate(0, "again")  # a finished step: nothing played again, the file as before
    assert [json.loads(x) for x in (tmp_path / DEV_CURVE_FILE).read_text().splitlines()] == lines


class _State:
    def __init__(self, step: int) -> None:
        self.global_step = step
        self.is_world_process_zero = True


class _Curve:
    def __init__(self, run_dir) -> None:
        self.run_dir = run_dir
        self.steps: list[int] = []

    def done(self, step: int) -> bool:
        return step in self.steps

    def evaluate(self, step: int, model) -> None:
        self.steps.append(step)


def test_the_callback_evaluates_every_nth_step_once_and_redraws_the_curves(tmp_path):
    curve = _Curve(tmp_path)
    callback = DevCurveCallback(25, curve)
    for step in (1, 24):
        callback.on_step_end(None, _State(step), None, model=object())
    assert curve.steps == [] and not (tmp_path / "curves.png").exists()
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 25, "reward/total": 0.5}) + "\n")
    for step in (25, 25, 26, 50):
        callback.on_step_end(None, _State(step), None, model=object())
    assert curve.steps == [25, 50]
    assert (tmp_path / "curves.png").is_file()
