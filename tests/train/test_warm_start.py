"""The warm start's data: scripted episodes tokenized as rollouts, loss on generated ids only."""

from __future__ import annotations

from dataclasses import replace

import pytest
from transformers import AutoTokenizer

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.models import ModelConfig, prepare_model, qwen2_5_template
from grasp.rollout.chat import ChatTokenizer
from grasp.rollout.engine import RolloutConfig
from grasp.train.warm_start import WarmStartSettings, adapt_plan, scripted_episodes, sft_rows

PREFIX = '<tool_call>\n{"name": "'


@pytest.fixture(scope="module")
def tokenizer():
    tok = AutoTokenizer.from_pretrained(prepare_model(ModelConfig()))
    tok.chat_template = qwen2_5_template()
    return tok


@pytest.fixture
def episodes(tiny_index, tiny_questions, tokenizer):
    config = EnvConfig(turn_budget=4, top_k=2, demonstration=True, schemas_in_prompt=False)
    env = RetrievalEnvironment(tiny_index, config)
    chat = ChatTokenizer(tokenizer, env.prompt_tool_schemas)
    settings = WarmStartSettings(questions=len(tiny_questions), reads=1)
    rollout = RolloutConfig(assistant_prefix=PREFIX)
    return scripted_episodes(settings, list(tiny_questions), env, chat, rollout)


def test_scripted_episodes_search_twice_read_then_answer_after_the_demonstration(episodes):
    # The demonstration's own calls come before the question: the script starts after them.
    for trajectory in episodes:
        names = [turn.call["name"] for turn in trajectory.turns]
        assert names == ["semantic_search", "keyword_search", "read_paragraph", "answer"]
        query = trajectory.turns[0].call["arguments"]["query"]
        assert query == trajectory.question
        assert all(turn.error is None for turn in trajectory.turns)


def test_sft_labels_cover_exactly_the_generated_ids(episodes, tokenizer):
    rows = sft_rows(episodes)
    for trajectory, row in zip(episodes, rows, strict=True):
        trace = trajectory.tokens
        assert row["input_ids"] == trace.prompt_ids + trace.completion_ids
        assert len(row["labels"]) == len(row["input_ids"])
        learned = [t for t in row["labels"] if t != -100]
        assert len(learned) == sum(trace.env_mask) > 0
        text = tokenizer.decode(learned)
        # The policy learns its calls, never the prefix the rollout inserts, nor an observation.
        for turn in trajectory.turns:
            assert turn.text.removeprefix(PREFIX) in text
            assert turn.observation is None or turn.observation[:30] not in text
        assert PREFIX not in text


def test_sft_rows_need_token_traces(tiny_index, tiny_questions):
    env = RetrievalEnvironment(tiny_index, EnvConfig(turn_budget=3))
    settings = WarmStartSettings(questions=1)
    untokenized = scripted_episodes(settings, list(tiny_questions), env, None, RolloutConfig())
    with pytest.raises(ValueError, match="token traces"):
        sft_rows(untokenized)


PLANS = [
    ["semantic_search", "answer"],
    ["keyword_search", "read_paragraph", "answer"],
    ["semantic_search", "keyword_search", "read_paragraph", "read_paragraph", "answer"],
]


def test_plans_share_the_questions_round_robin_and_are_followed_call_for_call(
    tiny_index, tiny_questions
):
    env = RetrievalEnvironment(tiny_index, EnvConfig(turn_budget=5, top_k=2))
    settings = WarmStartSettings(questions=len(tiny_questions), plans=PLANS)
    episodes = scripted_episodes(settings, list(tiny_questions), env, None, RolloutConfig())
    assert sorted(t.question_id for t in episodes) == sorted(q.question_id for q in tiny_questions)
    by_plan = {}
    for trajectory in episodes:
        names = [turn.call["name"] for turn in trajectory.turns]
        assert names in PLANS
        assert all(turn.error is None for turn in trajectory.turns)
        by_plan.setdefault(tuple(names), []).append(trajectory)
    shares = [len(by_plan.get(tuple(plan), [])) for plan in PLANS]
    assert sum(shares) == len(tiny_questions)
    assert max(shares) - min(shares) <= 1  # round-robin
    for trajectory in by_plan.get(tuple(PLANS[2]), []):  # two reads: two different paragraphs
        reads = [t.call["arguments"] for t in trajectory.turns[2:4]]
        assert reads[0] != reads[1]


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (["semantic_search"], "must end with 'answer'"),
        (["answer", "semantic_search", "answer"], "answer only there"),
        (["web_search", "answer"], "unknown tool"),
        (["keyword_search", "answer"], r"warm_start.plans\[1\] calls \['keyword_search'\]"),
    ],
)
def test_bad_plans_fail_naming_the_plan(tiny_index, tiny_questions, plan, message):
    tools = ["semantic_search", "read_paragraph", "answer"]  # the no-keyword ablation
    env = RetrievalEnvironment(tiny_index, EnvConfig(turn_budget=4, tools=tools))
    settings = WarmStartSettings(plans=[["semantic_search", "answer"], plan])
    with pytest.raises(ValueError, match=message):
        scripted_episodes(settings, list(tiny_questions), env, None, RolloutConfig())


CPU_GRASP_PLANS = [
    ["semantic_search", "answer"],
    ["semantic_search", "keyword_search", "answer"],
    ["semantic_search", "read_paragraph", "answer"],
    ["semantic_search", "keyword_search", "read_paragraph", "read_paragraph", "answer"],
]


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        (  # no read_paragraph: reads are dropped
            ["semantic_search", "keyword_search", "answer"],
            [
                ["semantic_search", "answer"],
                ["semantic_search", "keyword_search", "answer"],
                ["semantic_search", "answer"],
                ["semantic_search", "keyword_search", "answer"],
            ],
        ),
        (  # no semantic search: keyword search instead, and a plan that has both searches keeps one
            ["keyword_search", "read_paragraph", "answer"],
            [
                ["keyword_search", "answer"],
                ["keyword_search", "answer"],
                ["keyword_search", "read_paragraph", "answer"],
                ["keyword_search", "read_paragraph", "read_paragraph", "answer"],
            ],
        ),
        (  # no keyword search: the semantic search the plan already makes stays alone
            ["semantic_search", "read_paragraph", "answer"],
            [
                ["semantic_search", "answer"],
                ["semantic_search", "answer"],
                ["semantic_search", "read_paragraph", "answer"],
                ["semantic_search", "read_paragraph", "read_paragraph", "answer"],
            ],
        ),
    ],
)
def test_adapt_plan_rewrites_each_plan_for_the_variants_tools(tools, expected):
    assert [adapt_plan(plan, tools) for plan in CPU_GRASP_PLANS] == expected


def test_adapted_plans_play_in_the_no_keyword_ablation(tiny_index, tiny_questions):
    tools = ["semantic_search", "read_paragraph", "answer"]
    env = RetrievalEnvironment(tiny_index, EnvConfig(turn_budget=6, tools=tools))
    plans = [CPU_GRASP_PLANS[1], CPU_GRASP_PLANS[3]]
    refused = WarmStartSettings(questions=2, min_recall=0.0, plans=plans)
    with pytest.raises(ValueError, match=r"plans\[0\] calls \['keyword_search'\]"):
        scripted_episodes(refused, list(tiny_questions), env, None, RolloutConfig())
    adapted = replace(refused, adapt_plans=True)
    episodes = scripted_episodes(adapted, list(tiny_questions), env, None, RolloutConfig())
    called = [[turn.call["name"] for turn in episode.turns] for episode in episodes]
    assert called == [
        ["semantic_search", "answer"],
        ["semantic_search", "read_paragraph", "read_paragraph", "answer"],
    ]
