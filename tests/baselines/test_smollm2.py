"""Baselines with the real SmolLM2-135M-Instruct backend (transformers, CPU): rolled out by the
RolloutEngine on the tiny index and scored by the evaluation's summary, like any policy."""

from __future__ import annotations

import pytest

from grasp.baselines import BaselineConfig, BaselinePolicy, build_baseline_policy
from grasp.baselines.factory import make_baseline
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.eval.summary import summarize
from grasp.metrics import paragraph_recall
from grasp.reward import DEFAULT_REWARD_CONFIG
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.factory import PolicyConfig
from grasp.rollout.policy import SamplingConfig
from grasp.types import Retriever

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tiny_index):
    return RetrievalEnvironment(tiny_index, EnvConfig(top_k=3, turn_budget=4))


@pytest.fixture(scope="module")
def direct(env):
    built = build_baseline_policy(
        BaselineConfig(kind="direct", answer_tokens=12), PolicyConfig(kind="hf"), env
    )
    assert built.chat is None and built.model is not None
    return built.policy


def rollout(env, policy, questions):
    config = RolloutConfig(sampling=SamplingConfig(temperature=0.0, max_new_tokens=64))
    return RolloutEngine(env, policy, config).run(questions).scored(DEFAULT_REWARD_CONFIG)


def test_direct_and_single_step_with_smollm2(env, direct, tiny_index, tiny_questions):
    assert isinstance(direct, BaselinePolicy)
    questions = tiny_questions[:2]
    single = make_baseline(
        BaselineConfig(kind="single_step", answer_tokens=12), direct.backend, env.config
    )
    for policy, tools in ((direct, ["answer"]), (single, ["semantic_search", "answer"])):
        trajectories = rollout(env, policy, questions)
        for t in trajectories:
            assert [turn.call["name"] for turn in t.turns] == tools
            assert t.stop_reason == "answered" and t.answer
            assert t.extra["backend_calls"] == 1
            assert t.extra["backend_prompt_tokens"] > 20 and t.extra["backend_generated_tokens"] > 0
        results = summarize(trajectories)
        hits = tiny_index.search([q.question for q in questions], Retriever.DENSE, k=3)
        expected_recall = [
            paragraph_recall(
                {h.paragraph_id for h in found}, tiny_index.corpus.gold_paragraph_ids(q)
            )
            for q, found in zip(questions, hits, strict=True)
        ]
        if tools == ["answer"]:
            assert results.recall == 0.0
        else:
            assert results.recall == pytest.approx(sum(expected_recall) / 2)
            assert results.recall > 0
        assert results.turns_per_episode == len(tools)
        assert results.parse_error_rate == 0.0
        assert results.policy_extra["backend_calls_per_episode"] == 1.0
        assert 0.0 <= results.f1 <= 1.0


def test_the_backend_prompt_is_the_chat_template_without_tools(env, direct, tiny_questions):
    tokenizer = direct.backend.chat.tokenizer
    assert direct.backend.chat.tools == []
    ids = direct.backend.chat.prompt_ids([{"role": "user", "content": "Question: Who?"}])
    text = tokenizer.decode(ids)
    assert "<tools>" not in text and text.endswith("<|im_start|>assistant\n")
