"""The TRL bridge (grasp/train/trl_bridge.py): the TRL attributes it relies on exist in the
installed TRL; nothing else in the package touches TRL's trainer; prompts find their question
by content; the rollout's statistics reach TRL's own metric log."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import grasp
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.rollout.scripted import tool_call_text
from grasp.train.rollout_stats import REPORT_KEY
from grasp.train.trl_bridge import TRL_ATTRIBUTES, TrainingPrompts, prompt_key

PACKAGE = Path(grasp.__file__).parent
BRIDGE = PACKAGE / "train" / "trl_bridge.py"


def _assigned_on_self(cls: type) -> set[str]:
    """Every ``self.<name> = ...`` in the source of ``cls`` and its bases."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        names.update(re.findall(r"self\.([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=\n]*)?=(?!=)", source))
    return names


def test_every_trl_attribute_the_bridge_relies_on_exists_in_the_installed_trl():
    from trl import GRPOTrainer

    assigned = _assigned_on_self(GRPOTrainer)
    missing = [
        name for name in TRL_ATTRIBUTES if not hasattr(GRPOTrainer, name) and name not in assigned
    ]
    assert missing == [], f"TRL no longer has {missing}: update grasp/train/trl_bridge.py"


def test_the_pin_catches_an_attribute_trl_does_not_have():
    from trl import GRPOTrainer

    assert "_last_loaded_step" in _assigned_on_self(GRPOTrainer)
    assert "_no_such_attribute" not in _assigned_on_self(GRPOTrainer)
    assert not hasattr(GRPOTrainer, "_no_such_attribute")


def _outside_the_bridge():
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != BRIDGE:
            yield path, path.read_text()


def test_no_module_but_the_bridge_reads_a_private_attribute_of_the_trainer():
    private = re.compile(r"\btrainer\.(_[a-z]\w*|vllm_generation)\b")
    found = [
        f"{path.relative_to(PACKAGE)}: {match.group(0)}"
        for path, text in _outside_the_bridge()
        for match in private.finditer(text)
    ]
    assert found == []


def test_no_trainer_parameter_is_typed_any_outside_the_bridge():
    found = []
    for path, text in _outside_the_bridge():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.arg) and node.arg == "trainer" and node.annotation:
                if ast.unparse(node.annotation) == "Any":
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []


def test_only_the_bridge_subclasses_or_builds_trls_grpo_trainer():
    found = [
        str(path.relative_to(PACKAGE))
        for path, text in _outside_the_bridge()
        if re.search(r"from trl(\.\S+)? import [^\n]*\bGRPOTrainer\b", text)
    ]
    assert found == []


def test_a_prompt_finds_its_question_by_content_and_carries_no_id(tiny_index, tiny_questions):
    env = RetrievalEnvironment(tiny_index, EnvConfig())
    prompts = TrainingPrompts.of(env, tiny_questions)
    assert len(prompts.rows) == len(tiny_questions)
    for row, question in zip(prompts.rows, tiny_questions, strict=True):
        assert row["prompt"] == env.reset(question).messages
        assert all(set(message) <= {"role", "content"} for message in row["prompt"])
        # TRL deep-copies the prompts it hands back: the copy finds the same question.
        copy = [dict(message) for message in row["prompt"]]
        assert prompts.question_id(copy) == question.question_id
    with pytest.raises(ValueError, match="not one of the training prompts"):
        prompts.question_id([{"role": "user", "content": "an unknown question"}])


def test_copies_of_a_question_play_as_the_first_and_different_twins_are_refused(
    tiny_index, tiny_questions
):
    import dataclasses

    env = RetrievalEnvironment(tiny_index, EnvConfig())
    first = tiny_questions[0]
    copy = dataclasses.replace(first, question_id="copy")
    prompts = TrainingPrompts.of(env, [first, copy])
    assert len(prompts.rows) == 2
    assert prompts.question_id(prompts.rows[1]["prompt"]) == first.question_id
    twin = dataclasses.replace(first, question_id="twin", answers=("another answer",))
    with pytest.raises(ValueError, match=f"{first.question_id} and twin have the same prompt"):
        TrainingPrompts.of(env, [first, twin])


def test_prompt_key_ignores_key_order():
    assert prompt_key([{"role": "user", "content": "x"}]) == prompt_key(
        [{"content": "x", "role": "user"}]
    )


def test_the_rollouts_statistics_reach_trls_metric_log(tmp_path, scripted_trainer):
    trainer = scripted_trainer(
        tmp_path, lambda request: tool_call_text("answer", answer="Auckland"), max_steps=1
    )
    logged: list[tuple[str, float]] = []
    trainer._log_metric = lambda name, value: logged.append((name, value))
    rollout = trainer.rollout_func
    prompts = [row["prompt"] for row in rollout.prompts.rows[:1]] * trainer.num_generations
    out = rollout(prompts, trainer)
    report = out[REPORT_KEY]
    assert dict(logged) == report.metrics
    assert logged[0][0] == "answer/em"
    assert "reward/R_A" in dict(logged) and "stop/answered" in dict(logged)
    assert dict(logged)["stop/answered"] == 1.0
    assert [f.__name__ for f in trainer.reward_funcs] == [
        "R_A",
        "R_R",
        "R_S",
        "R_E",
        "R_F",
        "R_N",
        "R_G",
        "R_C",
    ]
