"""Each baseline's control flow in the real environment over the tiny index, with a canned
backend (tests/baselines/conftest.py): the exact tool calls, what reaches the backend's
prompts, and what each episode reports."""

from __future__ import annotations

import itertools

import pytest

from grasp.baselines import BaselineConfig, BaselinePolicy, make_baseline
from grasp.baselines.backend import Backend
from grasp.baselines.config import AdaptiveSettings
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.env.episode import TurnRecord
from grasp.reward import DEFAULT_REWARD_CONFIG
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.policy import Generation, GenerationRequest, Policy, SamplingConfig
from grasp.rollout.trajectory import Trajectory

SENTENCE_TOOLS = ["semantic_search", "keyword_search", "read_paragraph", "answer"]
PARAGRAPH_TOOLS = ["semantic_search", "keyword_search", "answer"]


def run(index, questions, backend: Backend, tools=None, top_k=3, budget=4, **config):
    env = RetrievalEnvironment(
        index, EnvConfig(tools=tools or SENTENCE_TOOLS, top_k=top_k, turn_budget=budget)
    )
    policy = make_baseline(BaselineConfig(**config), backend, env.config)
    assert isinstance(policy, Policy)
    return RolloutEngine(env, policy, RolloutConfig()).run(questions).scored(DEFAULT_REWARD_CONFIG)


def calls(trajectory: Trajectory) -> list[tuple[str, dict]]:
    return [(t.call["name"], t.call["arguments"]) for t in trajectory.turns]


def hit_texts(index, turn: TurnRecord) -> list[str]:
    """The texts of a search turn's hits, as the environment recorded them."""
    corpus = index.corpus
    return [
        corpus.sentence(h["sentence_id"])
        if h["sentence_id"] is not None
        else corpus.paragraph_text(h["paragraph_id"])
        for h in turn.hits
    ]


def passages_in(prompt: str) -> list[str]:
    """The numbered passage lines of a backend prompt, without their numbers."""
    return [line.split("] ", 1)[1] for line in prompt.splitlines() if line.startswith("[")]


# ---------------------------------------------------------------------------------- direct


def test_direct_answers_from_the_question_alone(tiny_index, tiny_questions, canned):
    llm, backend = canned(answer="Answer: Auckland.\nHe was born there.")
    [t] = run(tiny_index, tiny_questions[1:2], backend, kind="direct")
    assert calls(t) == [("answer", {"answer": "Auckland"})]
    assert (t.stop_reason, t.reward.em, t.retrieved_paragraph_ids) == (
        "answered",
        1.0,
        set(),
    )
    [prompt] = llm.prompts("answer")
    assert prompt == f"Question: {tiny_questions[1].question}\nAnswer:"
    assert t.extra == {
        "baseline": "direct",
        "context_paragraph_ids": [],
        "backend_calls": 1,
        "backend_prompt_tokens": 0,
        "backend_generated_tokens": 0,
    }


# ---------------------------------------------------------------------------------- single step


@pytest.mark.parametrize(
    ("search", "tool"), [("semantic", "semantic_search"), ("lexical", "keyword_search")]
)
def test_single_step_searches_once_then_answers_from_the_hits(
    tiny_index, tiny_questions, canned, search, tool
):
    llm, backend = canned(answer="Google")
    question = tiny_questions[2]
    [t] = run(tiny_index, [question], backend, kind="single_step", search=search)
    assert calls(t) == [(tool, {"query": question.question}), ("answer", {"answer": "Google"})]
    [prompt] = llm.prompts("answer")
    titles = [tiny_index.corpus.title(h["paragraph_id"]) for h in t.turns[0].hits]
    expected = [
        f"{title}: {text}"
        for title, text in zip(titles, hit_texts(tiny_index, t.turns[0]), strict=True)
    ]
    assert passages_in(prompt) == expected and len(expected) == 3
    assert t.extra["context_paragraph_ids"] == sorted({h["paragraph_id"] for h in t.turns[0].hits})


def test_single_step_keeps_context_k_of_the_hits(tiny_index, tiny_questions, canned):
    llm, backend = canned(answer="x")
    [t] = run(tiny_index, tiny_questions[:1], backend, kind="single_step", context_k=2, top_k=4)
    assert len(t.turns[0].hits) == 4
    assert len(passages_in(llm.prompts("answer")[0])) == 2


def test_hybrid_issues_both_searches_and_fuses_by_reciprocal_rank(
    tiny_index, tiny_questions, canned
):
    llm, backend = canned(answer="x")
    question = tiny_questions[0]
    [t] = run(tiny_index, [question], backend, kind="single_step", search="hybrid", context_k=4)
    assert [name for name, _ in calls(t)] == ["semantic_search", "keyword_search", "answer"]
    assert calls(t)[1][1] == {"query": question.question}
    assert t.semantic_paragraph_ids and t.keyword_paragraph_ids
    score: dict[int, float] = {}
    for turn in t.turns[:2]:
        for rank, hit in enumerate(turn.hits):
            score[hit["sentence_id"]] = score.get(hit["sentence_id"], 0.0) + 1 / (61 + rank)
    best = sorted(score, key=lambda s: -score[s])[:4]  # stable: first seen wins ties
    expected = [tiny_index.corpus.sentence(s) for s in best]
    assert [p.split(": ", 1)[1] for p in passages_in(llm.prompts("answer")[0])] == expected


def test_paragraph_granularity_answers_from_whole_paragraphs(tiny_index, tiny_questions, canned):
    llm, backend = canned(answer="Auckland")
    [t] = run(tiny_index, tiny_questions[1:2], backend, tools=PARAGRAPH_TOOLS, kind="single_step")
    assert [h["sentence_id"] for h in t.turns[0].hits] == [None, None, None]
    texts = [p.split(": ", 1)[1] for p in passages_in(llm.prompts("answer")[0])]
    assert texts == hit_texts(tiny_index, t.turns[0])
    assert set(t.read_paragraph_ids) == {h["paragraph_id"] for h in t.turns[0].hits}


# ---------------------------------------------------------------------------------- IRCoT


def test_ircot_searches_with_each_sentence_and_stops_at_the_answer(
    tiny_index, tiny_questions, canned
):
    sentences = iter(["Hillary was born in Auckland. Extra.", "So the answer is: Auckland."])
    llm, backend = canned(reason=lambda request: next(sentences), answer="unused")
    question = tiny_questions[1]
    [t] = run(tiny_index, [question], backend, kind="ircot", budget=5)
    assert calls(t) == [
        ("semantic_search", {"query": question.question}),
        ("semantic_search", {"query": "Hillary was born in Auckland."}),
        ("answer", {"answer": "Auckland"}),
    ]
    assert t.turns[1].text.startswith("Hillary was born in Auckland.\n<tool_call>")
    first, second = llm.prompts("reason")
    assert "Reasoning so far: (none yet)" in first
    assert "Reasoning so far: Hillary was born in Auckland.\n" in second
    for text in hit_texts(tiny_index, t.turns[0]):
        assert text in first
    for text in hit_texts(tiny_index, t.turns[1]):
        assert text in second
    assert llm.prompts("answer") == [] and t.stop_reason == "answered"


def test_ircot_is_capped_by_the_turn_budget(tiny_index, tiny_questions, canned):
    counter = itertools.count(1)
    llm, backend = canned(reason=lambda r: f"Fact number {next(counter)}.", answer="Auckland")
    [t] = run(tiny_index, tiny_questions[1:2], backend, kind="ircot", search="lexical", budget=4)
    assert calls(t) == [
        ("keyword_search", {"query": tiny_questions[1].question}),
        ("keyword_search", {"query": "Fact number 1."}),
        ("keyword_search", {"query": "Fact number 2."}),
        ("answer", {"answer": "Auckland"}),
    ]
    assert len(llm.prompts("reason")) == 2
    [final] = llm.prompts("answer")
    assert "Reasoning: Fact number 1. Fact number 2.\nAnswer:" in final
    assert t.extra["backend_calls"] == 3


def test_ircot_queries_are_cut_to_the_env_limit_and_never_empty(tiny_index, tiny_questions, canned):
    replies = iter(["Edmund Hillary climbed Mount Everest in 1953 with Tenzing.", "   "])
    llm, backend = canned(reason=lambda r: next(replies), answer="Auckland")
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, turn_budget=4, max_query_chars=30))
    policy = make_baseline(BaselineConfig(kind="ircot"), backend, env.config)
    [t] = (
        RolloutEngine(env, policy, RolloutConfig())
        .run(tiny_questions[1:2])
        .scored(DEFAULT_REWARD_CONFIG)
    )
    question = tiny_questions[1].question
    assert calls(t) == [
        ("semantic_search", {"query": question[:30].strip()}),
        ("semantic_search", {"query": "Edmund Hillary climbed Mount E"}),
        ("semantic_search", {"query": question[:30].strip()}),
        ("answer", {"answer": "Auckland"}),
    ]
    assert t.errors == {}


# ---------------------------------------------------------------------------------- CRAG


def grades_by_rank(*grades: str):
    """A grade reply per passage rank (the grades of one episode come in rank order)."""
    replies = itertools.cycle(grades)
    return lambda request: next(replies)


@pytest.mark.parametrize(
    ("grades", "threshold", "fires"),
    [
        (("no", "no", "no"), 0.0, True),
        (("yes", "yes", "yes"), 0.0, False),
        (("yes", "no", "yes"), 0.0, True),
        (("yes", "no", "yes"), 0.5, False),
        (("no", "no", "yes"), 0.5, True),
        (("no", "no", "no"), 1.0, False),
    ],
)
def test_crag_corrects_only_above_the_threshold(
    tiny_index, tiny_questions, canned, grades, threshold, fires
):
    llm, backend = canned(
        grade=grades_by_rank(*grades), rewrite="Query: Edmund Hillary born", answer="Auckland"
    )
    question = tiny_questions[1]
    [t] = run(tiny_index, [question], backend, kind="crag", crag_threshold=threshold)
    first = hit_texts(tiny_index, t.turns[0])
    assert [
        p.split("Passage: ")[1].split(": ", 1)[1].split("\n")[0] for p in llm.prompts("grade")
    ] == first
    relevant = [text for text, grade in zip(first, grades, strict=True) if grade == "yes"]
    context = [p.split(": ", 1)[1] for p in passages_in(llm.prompts("answer")[0])]
    share = grades.count("no") / 3
    assert t.extra["crag_irrelevant_share"] == pytest.approx(share)
    assert t.extra["crag_corrected"] is fires
    if fires:
        assert calls(t) == [
            ("semantic_search", {"query": question.question}),
            ("keyword_search", {"query": "Edmund Hillary born"}),
            ("answer", {"answer": "Auckland"}),
        ]
        assert context == list(dict.fromkeys(relevant + hit_texts(tiny_index, t.turns[1])))
        assert t.extra["backend_calls"] == 5
    else:
        assert calls(t) == [
            ("semantic_search", {"query": question.question}),
            ("answer", {"answer": "Auckland"}),
        ]
        assert context == relevant and llm.prompts("rewrite") == []
    irrelevant = ",".join(str(i + 1) for i, g in enumerate(grades) if g == "no") or "none"
    assert f"[irrelevant: {irrelevant}]" in t.turns[1].text


def test_crag_corrects_with_the_other_retriever_and_batches_the_grades(
    tiny_index, tiny_questions, canned
):
    llm, backend = canned(grade="No.", rewrite="", answer="x")
    trajectories = run(tiny_index, tiny_questions, backend, kind="crag", search="lexical")
    for t, question in zip(trajectories, tiny_questions, strict=True):
        # an empty rewrite falls back to the question
        assert calls(t)[:2] == [
            ("keyword_search", {"query": question.question}),
            ("semantic_search", {"query": question.question}),
        ]
    graded = sum(len(t.turns[0].hits) for t in trajectories)
    assert len(llm.prompts("grade")) == graded > 3
    assert llm.calls == [graded, 3, 3]  # one call for every grade, then rewrites, then answers


# ---------------------------------------------------------------------------------- Adaptive


@pytest.mark.parametrize(
    ("reply", "route", "tools"),
    [
        ("A", "none", ["answer"]),
        ("B: one search", "single", ["semantic_search", "answer"]),
        ("C", "multi", ["semantic_search", "semantic_search", "answer"]),
        ("I cannot tell", "single", ["semantic_search", "answer"]),
    ],
)
def test_adaptive_routes_by_the_backend(tiny_index, tiny_questions, canned, reply, route, tools):
    reasons = iter(["Hillary was born in Auckland.", "So the answer is: Auckland"])
    llm, backend = canned(route=reply, answer="Auckland", reason=lambda r: next(reasons))
    [t] = run(tiny_index, tiny_questions[1:2], backend, kind="adaptive")
    assert [name for name, _ in calls(t)] == tools
    assert t.extra["route"] == route and t.answer == "Auckland"
    assert f"[route: {route}]" in t.turns[0].text
    assert len(llm.prompts("route")) == 1
    assert tiny_questions[1].question in llm.prompts("route")[0]


@pytest.mark.parametrize(
    ("none_max", "multi_min", "route"), [(20, 30, "none"), (5, 30, "single"), (5, 10, "multi")]
)
def test_adaptive_length_router_uses_its_thresholds(
    tiny_index, tiny_questions, canned, none_max, multi_min, route
):
    llm, backend = canned(answer="Auckland", reason="So the answer is: Auckland")
    adaptive = AdaptiveSettings(
        route_by="length", none_max_words=none_max, multi_min_words=multi_min
    )
    [t] = run(tiny_index, tiny_questions[1:2], backend, kind="adaptive", adaptive=adaptive)
    assert len(tiny_questions[1].question.split()) == 15
    assert t.extra["route"] == route and llm.prompts("route") == []


def test_adaptive_fallback_route_is_configurable(tiny_index, tiny_questions, canned):
    llm, backend = canned(route="?", answer="Auckland")
    adaptive = AdaptiveSettings(fallback_route="none")
    [t] = run(tiny_index, tiny_questions[1:2], backend, kind="adaptive", adaptive=adaptive)
    assert calls(t) == [("answer", {"answer": "Auckland"})] and t.extra["route"] == "none"


# ---------------------------------------------------------------------------------- errors


class FailingLLM:
    def generate(self, requests, sampling):
        return [Generation(text="", error="out of memory") for _ in requests]


def test_a_backend_failure_stops_the_episode(tiny_index, tiny_questions):
    [t] = run(tiny_index, tiny_questions[:1], Backend(FailingLLM()), kind="single_step")
    assert t.stop_reason == "generation_error"
    assert [name for name, _ in calls(t)] == ["semantic_search"]


@pytest.mark.parametrize(
    ("config", "env", "message"),
    [
        (
            {"kind": "crag"},
            {"tools": ["semantic_search", "read_paragraph", "answer"]},
            "keyword_search",
        ),
        ({"kind": "single_step", "search": "hybrid"}, {"turn_budget": 2}, r"env.turn_budget >= 3"),
        ({"kind": "ircot", "search": "hybrid"}, {}, "hybrid is for single_step; baseline=ircot"),
        ({"kind": "crag", "search": "hybrid"}, {}, "hybrid is for single_step; baseline=crag"),
        ({"kind": "crag"}, {"turn_budget": 2}, r"env.turn_budget >= 3"),
        (
            {"kind": "direct", "reranker": {"enabled": True, "path": "x"}},
            {},
            "reranker is for single",
        ),
        ({"kind": "none"}, {}, "wraps nothing"),
    ],
)
def test_configurations_that_cannot_work_are_refused(config, env, message):
    from grasp.baselines.config import RerankerConfig

    if "reranker" in config:
        config = {**config, "reranker": RerankerConfig(**config["reranker"])}
    with pytest.raises(ValueError, match=message):
        make_baseline(BaselineConfig(**config), Backend(FailingLLM()), EnvConfig(**env))


@pytest.mark.parametrize(
    ("field", "value"),
    [("kind", "rag"), ("search", "sparse"), ("crag_threshold", 1.5), ("context_k", 0)],
)
def test_config_values_are_checked(field, value):
    with pytest.raises(ValueError, match=f"baseline.{field}"):
        BaselineConfig(**{field: value})


def test_baseline_policies_are_policies_that_answer_each_request():
    policy = make_baseline(BaselineConfig(kind="direct"), Backend(FailingLLM()), EnvConfig())
    assert isinstance(policy, BaselinePolicy) and isinstance(policy, Policy)
    # What the engine relies on: one generation per request, in order; a failed backend
    # call is that request's error, not an exception.
    requests = [
        GenerationRequest(
            messages=[{"role": "user", "content": f"Question: question {i}?"}],
            token_ids=None,
            max_new_tokens=16,
            request_id=f"q{i}#0",
        )
        for i in range(3)
    ]
    generations = policy.generate(requests, SamplingConfig())
    assert [g.error for g in generations] == ["backend: out of memory"] * 3


def test_the_summary_reports_routes_backend_use_and_context_recall(
    tiny_index, tiny_questions, canned
):
    from grasp.eval.summary import summarize
    from grasp.metrics import paragraph_recall

    letters = {q.question: letter for q, letter in zip(tiny_questions, "ABB", strict=True)}

    def route(request):
        asked = request.messages[-1]["content"].split("Question: ")[1]
        return letters[asked.removesuffix("\nLetter:")]

    llm, backend = canned(route=route, answer="Auckland")
    trajectories = run(tiny_index, tiny_questions, backend, kind="adaptive")
    extra = summarize(trajectories).policy_extra
    assert extra["routes"] == {"none": 1 / 3, "single": 2 / 3}
    assert extra["backend_calls_per_episode"] == 2.0
    recalls = [
        paragraph_recall(set(t.extra["context_paragraph_ids"]), set(t.gold_paragraph_ids))
        for t in trajectories
    ]
    assert recalls[0] == 0.0 and extra["context_recall"] == pytest.approx(sum(recalls) / 3)
    assert extra["context_recall_episodes"] == 3
