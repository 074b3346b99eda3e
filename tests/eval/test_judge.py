"""The LLM judge: strict verdict parsing, the OpenAI client against a loopback server, the
verdict cache, configuration errors, and the local transformers judge (SmolLM2)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hydra import compose, initialize_config_dir

from grasp.config import EvaluateConfig, register_configs, to_dataclass
from grasp.eval.judge import (
    JUDGE_CACHE_FILE,
    JudgeConfig,
    JudgeItem,
    JudgeKind,
    Verdict,
    build_judge,
    judge_trajectories,
    parse_verdict,
)
from grasp.paths import REPO_ROOT

register_configs()


def compose_judge(*overrides: str) -> JudgeConfig:
    """The judge of configs/evaluate.yaml with ``overrides`` (so the YAML files are tested)."""
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        return to_dataclass(compose("evaluate", overrides=list(overrides)), EvaluateConfig).judge


@pytest.fixture
def openai_config(judge_server) -> JudgeConfig:
    config = compose_judge(
        "judge=openai", f"judge.base_url={judge_server.url}", "judge.served_model=stub-judge"
    )
    config.max_retries = 0
    config.batch_size = 2
    return config


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("yes", Verdict.CORRECT),
        ("Yes.", Verdict.CORRECT),
        ("  NO \n", Verdict.WRONG),
        ("**yes**", Verdict.CORRECT),
        ('"no"', Verdict.WRONG),
        ("<think>Gold is Paris; so is the answer.</think>\nyes", Verdict.CORRECT),
        ("<think>never closed yes", Verdict.UNPARSEABLE),
        ("Yes, it is correct.", Verdict.UNPARSEABLE),
        ("yes no", Verdict.UNPARSEABLE),
        ("maybe", Verdict.UNPARSEABLE),
        ("", Verdict.UNPARSEABLE),
        ("yes..", Verdict.UNPARSEABLE),
    ],
)
def test_parse_verdict_is_strict(reply, verdict):
    assert parse_verdict(reply) is verdict


def test_the_v1_prompt_is_versioned_config():
    config = compose_judge()
    assert config.kind is JudgeKind.NONE
    assert config.prompt.version == "v1"
    for placeholder in ("{question}", "{gold_answers}", "{answer}"):
        assert placeholder in config.prompt.user
    assert build_judge(config) is None


def test_openai_judge_sends_one_request_per_answer_and_parses_replies(judge_server, openai_config):
    judge = build_judge(openai_config)
    items = [
        JudgeItem("q1", "Capital of France?", ("Paris", "City of Paris"), "paris"),
        JudgeItem("q2", "Capital of France?", ("Paris",), "Lyon"),
        JudgeItem("q3", "Capital of France?", ("Paris",), "dunno"),
        JudgeItem("q4", "Capital of France?", ("Paris",), None),
        JudgeItem("q5", "Capital of France?", ("Paris",), "pondered"),
        JudgeItem("q6", "Capital of France?", ("Paris",), "boom"),
    ]
    results = judge.judge(items)
    assert [r.verdict for r in results] == [
        Verdict.CORRECT,
        Verdict.WRONG,
        Verdict.UNPARSEABLE,
        Verdict.NO_ANSWER,
        Verdict.CORRECT,
        Verdict.ERROR,
    ]
    assert results[2].raw == "Probably yes"
    assert results[3].raw is None and "HTTP 400" in results[5].error
    assert len(judge_server.bodies) == judge.requests_sent == 5  # no request without an answer
    [body] = [b for b in judge_server.bodies if "answer: paris\n" in b["messages"][-1]["content"]]
    assert body["model"] == "stub-judge" and body["temperature"] == 0.0
    assert body["max_tokens"] == 16 and "tools" not in body
    system, user = body["messages"]
    assert system["role"] == "system" and "yes or no" in system["content"]
    assert "Question: Capital of France?" in user["content"]
    assert "Gold answer (alternatives separated by |): Paris | City of Paris" in user["content"]
    assert "Predicted answer: paris" in user["content"]


def test_cache_reuse_on_resume_sends_no_request_twice(
    judge_server, openai_config, trajectory, tmp_path
):
    trajectories = [
        trajectory("q1#0", "Paris", ("Paris",), {1}),
        trajectory("q1#1", "Paris", ("Paris",), {1}),  # same question and answer: asked once
        trajectory("q2#0", "Lyon", ("Paris",), {1}),
        trajectory("q3#0", "dunno", ("Paris",), {1}),
        trajectory("q4#0", None, ("Paris",), {1}),
        trajectory("q5#0", "boom", ("Paris",), {1}),
    ]
    cache = tmp_path / JUDGE_CACHE_FILE
    first = judge_trajectories(build_judge(openai_config), trajectories, cache)
    assert len(judge_server.bodies) == 4
    assert {k: str(v.verdict) for k, v in first.items()} == {
        "q1#0": "correct",
        "q1#1": "correct",
        "q2#0": "wrong",
        "q3#0": "unparseable",
        "q4#0": "no_answer",
        "q5#0": "error",
    }
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    assert [(r["question_id"], r["verdict"]) for r in records] == [
        ("q1", "correct"),
        ("q2", "wrong"),
        ("q3", "unparseable"),  # kept: the reply is the judge's, asking again would not help
    ]
    assert records[0]["prompt_version"] == "v1" and records[0]["judge"] == "openai:stub-judge"
    again = judge_trajectories(build_judge(openai_config), trajectories, cache)
    assert len(judge_server.bodies) == 5  # only the failed request is sent again
    assert "Predicted answer: boom\n" in judge_server.bodies[-1]["messages"][-1]["content"]
    assert {k: v.verdict for k, v in again.items() if k != "q5#0"} == {
        k: v.verdict for k, v in first.items() if k != "q5#0"
    }


def test_a_new_prompt_version_is_judged_anew(judge_server, openai_config, trajectory, tmp_path):
    trajectories = [trajectory("q1#0", "Paris", ("Paris",), {1})]
    judge_trajectories(build_judge(openai_config), trajectories, tmp_path / JUDGE_CACHE_FILE)
    other = dataclasses.replace(
        openai_config, prompt=dataclasses.replace(openai_config.prompt, version="v2")
    )
    judge_trajectories(build_judge(other), trajectories, tmp_path / JUDGE_CACHE_FILE)
    assert len(judge_server.bodies) == 2


def test_a_changed_prompt_under_an_old_version_is_refused(
    judge_server, openai_config, trajectory, tmp_path
):
    trajectories = [trajectory("q1#0", "Paris", ("Paris",), {1})]
    judge_trajectories(build_judge(openai_config), trajectories, tmp_path / JUDGE_CACHE_FILE)
    edited = dataclasses.replace(
        openai_config,
        prompt=dataclasses.replace(openai_config.prompt, system="Be lenient."),
    )
    with pytest.raises(
        ValueError, match=r"judge_cache.jsonl: judge.prompt.version='v1' was cached"
    ):
        judge_trajectories(build_judge(edited), trajectories, tmp_path / JUDGE_CACHE_FILE)


def test_a_killed_judging_run_keeps_the_verdicts_of_its_finished_batches(
    judge_server, openai_config, trajectory, tmp_path, monkeypatch
):
    trajectories = [trajectory(f"q{i}#0", "Paris", ("Paris",), {1}) for i in range(5)]
    cache = tmp_path / JUDGE_CACHE_FILE
    judge = build_judge(openai_config)  # batch_size 2: batches q0 q1 | q2 q3 | q4
    ask, asked = judge.judge, []

    def killed_during_the_second_batch(items):
        if asked:
            raise KeyboardInterrupt
        asked.append(items)
        return ask(items)

    monkeypatch.setattr(judge, "judge", killed_during_the_second_batch)
    with pytest.raises(KeyboardInterrupt):
        judge_trajectories(judge, trajectories, cache)
    kept = [json.loads(line)["question_id"] for line in cache.read_text().splitlines()]
    assert kept == ["q0", "q1"]
    verdicts = judge_trajectories(build_judge(openai_config), trajectories, cache)
    assert len(judge_server.bodies) == 5, "the resumed run asks only q2, q3 and q4"
    assert {str(v.verdict) for v in verdicts.values()} == {"correct"}


@pytest.fixture
def judged_twice(judge_server, openai_config, trajectory, tmp_path):
    """Two answers (q0, q1) judged into a fresh cache: (trajectories, cache path)."""
    trajectories = [trajectory(f"q{i}#0", "Paris", ("Paris",), {1}) for i in range(2)]
    cache = tmp_path / JUDGE_CACHE_FILE
    judge_trajectories(build_judge(openai_config), trajectories, cache)
    assert len(judge_server.bodies) == 2
    return trajectories, cache


def test_a_torn_last_cached_verdict_is_judged_again(judge_server, openai_config, judged_twice):
    trajectories, cache = judged_twice
    whole = cache.read_text().splitlines()
    cache.write_text(whole[0] + "\n" + whole[1][:25])  # killed while writing q1's verdict
    verdicts = judge_trajectories(build_judge(openai_config), trajectories, cache)
    assert len(judge_server.bodies) == 3, "q1 is asked again, q0 is not"
    assert cache.read_text().splitlines() == whole
    assert str(verdicts["q1#0"].verdict) == "correct"


def test_a_corrupted_cache_line_is_named_and_the_cache_left_alone(
    judge_server, openai_config, judged_twice
):
    trajectories, cache = judged_twice
    lines = cache.read_text().splitlines()
    record = json.loads(lines[0])
    del record["prompt_sha256"]
    corrupted = "\n".join([json.dumps(record), lines[1]]) + "\n"
    cache.write_text(corrupted)
    with pytest.raises(ValueError, match=r"line 1 is not a judge verdict \(.*prompt_sha256"):
        judge_trajectories(build_judge(openai_config), trajectories, cache)
    assert cache.read_text() == corrupted
    assert len(judge_server.bodies) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"base_url": ""}, "judge.base_url and judge.served_model"),
        ({"prompt_user": "Is {prediction} right?"}, "judge.prompt.user must contain {answer}"),
        ({"prompt_user": "{answer} vs {gold}"}, "judge.prompt.user uses a field other than"),
        ({"prompt_version": ""}, "judge.prompt.version is empty"),
        ({"batch_size": 0}, "judge.batch_size"),
    ],
)
def test_configuration_errors_name_the_field(openai_config, change, message):
    prompt = openai_config.prompt
    if "prompt_user" in change:
        prompt = dataclasses.replace(prompt, user=change.pop("prompt_user"))
    if "prompt_version" in change:
        prompt = dataclasses.replace(prompt, version=change.pop("prompt_version"))
    # The config checks itself when it is built, before any judge model or server is reached.
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        dataclasses.replace(openai_config, prompt=prompt, **change)


def test_unknown_judge_kind_names_the_field():
    with pytest.raises(Exception, match="judge.kind"):
        compose_judge("judge.kind=gpt")


@pytest.mark.slow
def test_local_hf_judge_smollm2_is_batched_and_deterministic():
    config = compose_judge("judge=hf")
    items = [
        JudgeItem("q1", "What is the capital of France?", ("Paris",), "Paris"),
        JudgeItem("q2", "What is the capital of France?", ("Paris",), "Berlin"),
        JudgeItem("q3", "Who wrote Hamlet?", ("William Shakespeare",), ""),
    ]
    judge = build_judge(config)
    together = judge.judge(items)
    assert judge.requests_sent == 2
    assert together[2].verdict is Verdict.NO_ANSWER
    for result in together[:2]:
        assert result.raw, "the model wrote a reply"
        assert result.verdict is parse_verdict(result.raw)
    again = judge.judge(items)
    assert [r.raw for r in again] == [r.raw for r in together]  # greedy: same batching, same text
    # Across batchings greedy bf16 text may differ by rounding (see HFPolicy's docstring; on
    # some CPUs the second reply changes), so one-by-one judging is checked for its shape only.
    judge.config.batch_size = 1
    one_by_one = judge.judge(items)
    assert judge.requests_sent == 2 + 2 + 2
    assert [r.verdict is parse_verdict(r.raw) for r in one_by_one[:2]] == [True, True]
