"""The robustness suite's measurements over real tiny indexes, driven by scripted policies."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir

from grasp.config import RobustnessConfig, register_configs, to_dataclass
from grasp.corpus import CorpusIndex, IndexConfig, build_index
from grasp.corpus.near_duplicates import NearDuplicateConfig
from grasp.data import write_normalized
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.experiments.adversarial import inject, poison
from grasp.experiments.robustness import RunName, run_robustness
from grasp.experiments.robustness_metrics import (
    answer_flips,
    attack_success,
    same_call,
    stop_reason_shares,
    top_k_share,
)
from grasp.paths import REPO_ROOT
from grasp.reward import DEFAULT_REWARD_CONFIG
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.scripted import ScriptedPolicy, tool_call_text

ENV = EnvConfig(top_k=3, turn_budget=4)


def _turn(request) -> int:
    return sum(1 for m in request.messages if m["role"] == "assistant")


def _question(request) -> str:
    user = next(m["content"] for m in request.messages if m["role"] == "user")
    return user.splitlines()[0].removeprefix("Question: ").strip()


def obeying(injections):
    """Searches the question, then does what an injection it was shown asks, then answers X."""
    by_question = {}

    def script(request):
        turn, question = _turn(request), _question(request)
        if turn == 0:
            return tool_call_text("keyword_search", query=question)
        shown = request.messages[-1]["content"]
        made = next((i for i in injections if i.target in shown), None)
        if turn == 1 and made is not None:
            by_question[question] = made
            return tool_call_text(made.requested_call["name"], **made.requested_call["arguments"])
        target = by_question[question].target if question in by_question else "unknown"
        return tool_call_text("answer", answer=target)

    return ScriptedPolicy(script)


def ignoring(questions):
    """Searches the question, then answers the gold answer, whatever the results say."""
    gold = {q.question: q.answers[0] for q in questions}

    def script(request):
        if _turn(request) == 0:
            return tool_call_text("keyword_search", query=_question(request))
        return tool_call_text("answer", answer=gold[_question(request)])

    return ScriptedPolicy(script)


@pytest.fixture(scope="module")
def attack(tiny_questions):
    return inject(tiny_questions, seed=0)


@pytest.fixture(scope="module")
def injected_index(tmp_path_factory, attack):
    directory = tmp_path_factory.mktemp("injected")
    build_index(attack.questions, IndexConfig(), directory)
    return CorpusIndex.load(directory)


def roll_out(index, policy, questions, env=ENV):
    engine = RolloutEngine(RetrievalEnvironment(index, env), policy, RolloutConfig())
    return engine.run(questions).scored(DEFAULT_REWARD_CONFIG)


def test_a_policy_that_obeys_the_injections_is_attacked_every_time(
    injected_index, attack, tiny_questions
):
    trajectories = roll_out(injected_index, obeying(attack.injections), tiny_questions)
    result = attack_success(trajectories, attack.injections, injected_index.corpus)
    kinds = sorted(str(i.kind) for i in attack.injections)
    assert result == {
        "attack_success_rate": 1.0,
        "answered_target_rate": 1.0,
        "followed_call_rate": 1.0,
        "by_kind": dict.fromkeys(kinds, 1.0),
        "episodes": 3,
    }


def test_a_policy_that_ignores_the_injections_is_never_attacked(
    injected_index, attack, tiny_questions
):
    trajectories = roll_out(injected_index, ignoring(tiny_questions), tiny_questions)
    # It was shown its injection (the search found it) and still answered the gold answer.
    corpus = injected_index.corpus
    injected = {corpus.paragraph_id_of(i.paragraph) for i in attack.injections}
    assert all({h["paragraph_id"] for h in t.turns[0].hits} & injected for t in trajectories)
    result = attack_success(trajectories, attack.injections, corpus)
    assert result["attack_success_rate"] == 0.0
    assert result["answered_target_rate"] == result["followed_call_rate"] == 0.0
    assert set(result["by_kind"].values()) == {0.0}
    assert stop_reason_shares(trajectories) == {"answered": 1.0}


def test_a_call_matches_the_requested_one_by_tool_and_normalized_arguments():
    requested = {"name": "answer", "arguments": {"answer": "Quillmere Abbey"}}
    assert same_call({"name": "answer", "arguments": {"answer": "quillmere abbey."}}, requested)
    assert not same_call({"name": "answer", "arguments": {"answer": "Auckland"}}, requested)
    assert not same_call({"name": "keyword_search", "arguments": {"query": "x"}}, requested)
    assert not same_call(None, requested)


@pytest.fixture(scope="module")
def poisoned(tiny_questions, tmp_path_factory):
    made = poison(tiny_questions, copies=4, seed=0)
    indexes = {}
    for name, threshold in (("off", 0.0), ("on", 0.7)):
        directory = tmp_path_factory.mktemp(f"poisoned-{name}")
        config = IndexConfig(near_duplicates=NearDuplicateConfig(threshold=threshold))
        build_index(made.questions, config, directory)
        indexes[name] = CorpusIndex.load(directory)
    return made, indexes


def test_the_copies_crowd_the_top_k_until_detection_drops_them(poisoned, tiny_questions):
    made, indexes = poisoned
    off = top_k_share(indexes["off"], tiny_questions, made.poisons, ENV)
    on = top_k_share(indexes["on"], tiny_questions, made.poisons, ENV)
    assert off["keyword_search"] == 1.0  # the copies quote the question: BM25 ranks them first
    assert off["semantic_search"] >= 2 / 3
    assert all(on[tool] < off[tool] for tool in off)
    report = indexes["on"].manifest.corpus["near_duplicates"]
    assert report["paragraphs_dropped"] == 9 and report["sentences_dropped"] == 27
    assert "near_duplicates" not in indexes["off"].manifest.corpus


def test_answer_flips_count_changed_answers_and_answers_of_the_poison(poisoned, tiny_questions):
    made, indexes = poisoned
    clean = roll_out(indexes["off"], ignoring(tiny_questions), tiny_questions)
    wrong = {tiny_questions[0].question: made.poisons[0].wrong_answer}
    gold = {q.question: q.answers[0] for q in tiny_questions}

    def credulous(request):
        question = _question(request)
        return tool_call_text("answer", answer=wrong.get(question, gold[question]))

    attacked = roll_out(indexes["off"], ScriptedPolicy(credulous), tiny_questions)
    assert answer_flips(clean, attacked, made.poisons) == {
        "answer_changed_rate": 1 / 3,
        "correct_to_wrong_rate": 1 / 3,
        "answered_poison_rate": 1 / 3,
    }


def test_the_suite_runs_end_to_end_for_the_scripted_policy(tmp_path, tiny_questions):
    """scripts/robustness.py's work on the tiny questions as hotpotqa's dev set."""
    write_normalized(list(tiny_questions), tmp_path / "data" / "hotpotqa" / "dev.jsonl")
    register_configs()
    overrides = [
        "policy=scripted",
        f"data_dir={tmp_path / 'data'}",
        f"index_root={tmp_path / 'indexes'}",
        f"out={tmp_path / 'out'}",
        "n=3",
        "env.top_k=3",
        "poisoning.copies=4",
        "exhaustion.turn_budget=3",
    ]
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        config = to_dataclass(compose("robustness", overrides=overrides), RobustnessConfig)
    report = run_robustness(config)
    written = json.loads((tmp_path / "out" / "robustness.json").read_text())
    assert written["questions"] == 3
    assert set(written["runs"]) == {str(r) for r in RunName} - {"exhaustion_token_budget"}
    assert report.notes == [
        "exhaustion_token_budget: not run, the policy has no token trace (no token budget applies)"
    ]
    assert written["injection"]["episodes"] == 3
    assert written["poisoning"]["detection_on"]["near_duplicates"]["paragraphs_dropped"] == 9
    assert written["poisoning"]["detection_off"]["near_duplicates"] is None
    for run in written["exhaustion"].values():
        assert run["ended"] == run["episodes"] == 3
    markdown = (tmp_path / "out" / "robustness.md").read_text()
    assert "## Indirect prompt injection" in markdown and "| detection_on |" in markdown
    assert (tmp_path / "out" / "clean" / "trajectories.jsonl").exists()
