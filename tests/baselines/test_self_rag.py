"""Self-RAG and Adaptive-RAG (index router + Self-RAG) in the real environment over the tiny
index, with the scripted backend of tests/baselines/conftest.py (``CannedLLM``): the exact
sequence of decisions per trigger, the bounds of both loops, the route kept for the whole
episode, the router prompt built from the index's titles, and the trigger rate reported."""

from __future__ import annotations

import dataclasses
import itertools
from types import SimpleNamespace

import pytest

from grasp.baselines import BaselineConfig, build_baseline_policy, make_baseline
from grasp.baselines.adaptive_self_rag import AdaptiveSelfRAGPolicy, index_summary
from grasp.baselines.backend import Backend
from grasp.baselines.config import IndexRouterSettings, SelfRAGSettings
from grasp.corpus.corpus import SentenceCorpus
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.reward import DEFAULT_REWARD_CONFIG
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.factory import PolicyConfig
from grasp.rollout.trajectory import Trajectory

TOOLS = ["semantic_search", "keyword_search", "answer"]
REWRITE = "Query: Edmund Hillary birthplace"


def run(index, questions, backend: Backend, budget=5, summary=None, **config):
    env = RetrievalEnvironment(index, EnvConfig(tools=TOOLS, top_k=3, turn_budget=budget))
    policy = make_baseline(BaselineConfig(**config), backend, env.config, index_summary=summary)
    return RolloutEngine(env, policy, RolloutConfig()).run(questions).scored(DEFAULT_REWARD_CONFIG)


def calls(trajectory: Trajectory) -> list[tuple[str, dict]]:
    return [(t.call["name"], t.call["arguments"]) for t in trajectory.turns]


def cycle(*replies: str):
    """Replies in order, over and over (one episode's grades come in rank order)."""
    replies_ = itertools.cycle(replies)
    return lambda request: next(replies_)


def settings(**fields) -> SelfRAGSettings:
    return SelfRAGSettings(**fields)


# ---------------------------------------------------------------------------------- the trigger

ONE_OUT = ["retrieve", "grade:yes,no,yes"]
ANSWERED = ["generate", "grounded:yes", "answers:yes", "answer"]


@pytest.mark.parametrize(
    ("trigger", "decisions", "searches"),
    [
        (
            "any",
            [
                *ONE_OUT,
                "trigger:fired",
                "rewrite:filtered",
                "grade:yes,no,yes",
                "trigger:fired",
                "bound:max_rewrites",
                *ANSWERED,
            ],
            2,
        ),
        ("all", [*ONE_OUT, "trigger:held", *ANSWERED], 1),
    ],
)
def test_any_and_all_reproduce_crag_and_self_rag_on_the_same_hits(
    tiny_index, tiny_questions, canned, trigger, decisions, searches
):
    llm, backend = canned(
        grade=cycle("yes", "no", "yes"),
        rewrite=REWRITE,
        answer="Auckland",
        grounded="yes",
        answers="Yes.",
    )
    question = tiny_questions[1]
    config = settings(trigger=trigger, max_rewrites=1)
    [t] = run(tiny_index, [question], backend, kind="self_rag", self_rag=config)
    assert t.extra["decisions"] == decisions
    expected = [("semantic_search", {"query": question.question})]
    if searches == 2:
        expected.append(("semantic_search", {"query": "Edmund Hillary birthplace"}))
    assert calls(t) == [*expected, ("answer", {"answer": "Auckland"})]
    assert t.extra["rewrite_triggered"] is (trigger == "any")
    assert (t.extra["rewrites"], t.extra["regenerations"]) == (searches - 1, 0)
    assert t.extra["self_rag_trigger"] == trigger
    assert t.extra["irrelevant_shares"] == [pytest.approx(1 / 3)] * searches
    # every decision is also in the text of the turn that took it
    noted = [d for turn in t.turns for d in _note(turn.text, "decisions").split()]
    assert noted == decisions
    # the answer reads the hits graded relevant: ranks 1 and 3 of each search, once each
    kept = {h["paragraph_id"] for turn in t.turns[:searches] for h in turn.hits[::2]}
    assert t.extra["context_paragraph_ids"] == sorted(kept)
    assert len(llm.prompts("grade")) == 3 * searches


def test_all_rewrites_only_when_every_hit_is_filtered_out(tiny_index, tiny_questions, canned):
    grades = iter(["no"] * 3 + ["yes", "no", "no"])
    llm, backend = canned(
        grade=lambda r: next(grades), rewrite=REWRITE, answer="x", grounded="yes", answers="yes"
    )
    [t] = run(tiny_index, tiny_questions[1:2], backend, kind="self_rag")
    assert t.extra["decisions"] == [
        "retrieve",
        "grade:no,no,no",
        "trigger:fired",
        "rewrite:filtered",
        "grade:yes,no,no",
        "trigger:held",
        *ANSWERED,
    ]
    [rewrite] = llm.prompts("rewrite")
    assert f"Queries already tried: {tiny_questions[1].question}\n" in rewrite
    # only the first hit of the second search was kept
    assert t.extra["context_paragraph_ids"] == [t.turns[1].hits[0]["paragraph_id"]]


@pytest.mark.parametrize(
    ("grades", "threshold"),
    [
        (("no", "no", "no"), 0.0),
        (("yes", "yes", "yes"), 0.0),
        (("yes", "no", "yes"), 0.0),
        (("yes", "no", "yes"), 0.5),
        (("no", "no", "yes"), 0.5),
    ],
)
def test_the_trigger_fires_exactly_when_crag_corrects(
    tiny_index, tiny_questions, canned, grades, threshold
):
    """trigger=any is CRAG's threshold 0, trigger=share its threshold; with the other
    retriever for the rewrite, the first two calls are CRAG's."""
    replies = {"grade": cycle(*grades), "rewrite": REWRITE, "answer": "x"}
    question = tiny_questions[1:2]
    _, crag_backend = canned(**replies)
    [crag] = run(tiny_index, question, crag_backend, kind="crag", crag_threshold=threshold)
    trigger = {"trigger": "any"} if threshold == 0.0 else {"trigger": "share"}
    config = settings(**trigger, trigger_share=threshold, rewrite_search="other", max_rewrites=1)
    _, backend = canned(**replies, grounded="yes", answers="yes")
    [t] = run(tiny_index, question, backend, kind="self_rag", self_rag=config)
    assert t.extra["rewrite_triggered"] is crag.extra["rewrite_triggered"]
    assert crag.extra["rewrite_triggered"] is crag.extra["crag_corrected"]
    assert calls(t)[:2] == calls(crag)[:2]
    assert t.turns[0].hits == crag.turns[0].hits


# ---------------------------------------------------------------------------------- the bounds


@pytest.mark.parametrize(
    ("max_rewrites", "budget", "bound"),
    [(2, 6, "max_rewrites"), (0, 6, "max_rewrites"), (5, 3, "turn_budget")],
)
def test_rewrites_stop_at_max_rewrites_or_the_turn_budget(
    tiny_index, tiny_questions, canned, max_rewrites, budget, bound
):
    llm, backend = canned(grade="yes", rewrite="", answer="x", grounded="yes", answers="no")
    config = settings(max_rewrites=max_rewrites, max_regenerations=0)
    [t] = run(tiny_index, tiny_questions[1:2], backend, budget, kind="self_rag", self_rag=config)
    rewrites = min(max_rewrites, budget - 2)
    round_ = ["grade:yes,yes,yes", "trigger:held", "generate", "grounded:yes", "answers:no"]
    assert t.extra["decisions"] == [
        "retrieve",
        *(round_ + ["rewrite:unanswered"]) * rewrites,
        *round_,
        f"bound:{bound}",
        "answer",
    ]
    names = [name for name, _ in calls(t)]
    assert names == ["semantic_search"] * (1 + rewrites) + ["answer"]
    assert t.extra["rewrites"] == rewrites and t.stop_reason == "answered"
    # an empty rewrite searches with the question again
    assert {args["query"] for _, args in calls(t)[:-1]} == {tiny_questions[1].question}


def test_regenerations_stop_at_max_regenerations(tiny_index, tiny_questions, canned):
    drafts = iter(["Wellington", "Sydney", "Auckland"])
    llm, backend = canned(
        grade="yes", answer=lambda r: next(drafts), grounded="No", answers="yes", rewrite=""
    )
    config = settings(max_regenerations=2)
    [t] = run(tiny_index, tiny_questions[1:2], backend, kind="self_rag", self_rag=config)
    assert t.extra["decisions"] == [
        "retrieve",
        "grade:yes,yes,yes",
        "trigger:held",
        "generate",
        "grounded:no",
        "regenerate",
        "grounded:no",
        "regenerate",
        "grounded:no",
        "bound:max_regenerations",
        "answers:yes",
        "answer",
    ]
    assert calls(t)[-1] == ("answer", {"answer": "Auckland"})
    first, second, third = llm.prompts("answer")
    assert "not supported" not in first
    assert 'The answer "Wellington" is not supported by the passages.' in second
    assert 'The answer "Sydney" is not supported by the passages.' in third
    assert t.extra["regenerations"] == 2 and len(llm.prompts("grounded")) == 3
    assert "Answer: Sydney\nIs the answer supported" in llm.prompts("grounded")[1]


def test_with_nothing_kept_the_groundedness_check_is_skipped(tiny_index, tiny_questions, canned):
    llm, backend = canned(grade="no", answer="x", answers="yes", grounded="yes")
    config = settings(max_rewrites=0)
    [t] = run(tiny_index, tiny_questions[1:2], backend, kind="self_rag", self_rag=config)
    assert t.extra["decisions"] == [
        "retrieve",
        "grade:no,no,no",
        "trigger:fired",
        "bound:max_rewrites",
        "generate",
        "grounded:skipped",
        "answers:yes",
        "answer",
    ]
    assert llm.prompts("grounded") == [] and t.extra["context_paragraph_ids"] == []
    assert t.extra["rewrite_triggered"] is True and t.extra["rewrites"] == 0


# ---------------------------------------------------------------------------------- the router


def test_the_route_is_kept_across_rewrites(tiny_index, tiny_questions, canned):
    routes = iter(["A", "B", "B"])  # a second routing would send it elsewhere
    llm, backend = canned(
        route=lambda r: next(routes),
        grade=cycle("yes", "no"),
        rewrite=REWRITE,
        answer="Auckland",
        grounded="yes",
        answers="yes",
    )
    config = settings(trigger="any", max_rewrites=2)
    [t] = run(
        tiny_index,
        tiny_questions[1:2],
        backend,
        summary="S",
        kind="adaptive_self_rag",
        self_rag=config,
    )
    assert [name for name, _ in calls(t)] == ["semantic_search"] * 3 + ["answer"]
    assert len(llm.prompts("route")) == 1 and t.extra["route"] == "corpus"
    assert [_note(turn.text, "route") for turn in t.turns] == ["corpus", "", "", ""]
    assert t.extra["rewrites"] == 2 and t.extra["rewrite_triggered"] is True


@pytest.mark.parametrize(("reply", "route"), [("B", "none"), ("no idea", "corpus")])
def test_the_router_answers_without_retrieval_or_falls_back(
    tiny_index, tiny_questions, canned, reply, route
):
    llm, backend = canned(
        route=reply, grade="yes", answer="Auckland", grounded="yes", answers="yes"
    )
    [t] = run(tiny_index, tiny_questions[1:2], backend, summary="S", kind="adaptive_self_rag")
    assert t.extra["route"] == route
    if route == "none":
        assert calls(t) == [("answer", {"answer": "Auckland"})]
        assert llm.prompts("grade") == [] and "rewrite_triggered" not in t.extra
    else:
        assert [name for name, _ in calls(t)] == ["semantic_search", "answer"]


def retitled(questions, title: str, new: str):
    def fix(question):
        paragraphs = tuple(
            dataclasses.replace(p, title=new) if p.title == title else p
            for p in question.paragraphs
        )
        return dataclasses.replace(question, paragraphs=paragraphs)

    return [fix(q) for q in questions]


def test_the_router_prompt_is_built_from_the_index_titles(tiny_index, tiny_questions, canned):
    summary = index_summary(tiny_index.corpus, titles=50)
    for title in ("Edmund Hillary", "Auckland", "Marie Curie", "Guido van Rossum"):
        assert title in summary
    corpus = tiny_index.corpus
    assert summary.startswith(
        f"{corpus.num_paragraphs} paragraphs ({corpus.num_sentences} sentences) under "
        f"{corpus.num_paragraphs} titles"
    )
    changed = SentenceCorpus.from_questions(retitled(tiny_questions, "Auckland", "City of Sails"))
    other = index_summary(changed, titles=50)
    assert other != summary and "City of Sails" in other and "Auckland" not in other
    prompts = []
    for text in (summary, other):
        llm, backend = canned(route="B", answer="x")
        run(tiny_index, tiny_questions[1:2], backend, summary=text, kind="adaptive_self_rag")
        [prompt] = llm.prompts("route")
        assert f"A search index holds these documents:\n{text}\n" in prompt
        assert prompt.endswith(f"Question: {tiny_questions[1].question}\nLetter:")
        prompts.append(prompt)
    assert prompts[0] != prompts[1]
    assert len(index_summary(tiny_index.corpus, titles=2).split("; ")) == 2


def test_the_built_policy_summarizes_its_own_index(tiny_index, tiny_questions):
    served = PolicyConfig(kind="openai", base_url="http://127.0.0.1:9/v1", served_model="m")
    router = IndexRouterSettings(summary_titles=3)
    config = BaselineConfig(kind="adaptive_self_rag", index_router=router)
    for corpus in (tiny_index.corpus, SentenceCorpus.from_questions(tiny_questions[:1])):
        env = RetrievalEnvironment(SimpleNamespace(corpus=corpus), EnvConfig(tools=TOOLS, top_k=3))
        built = build_baseline_policy(config, served, env)
        assert isinstance(built.policy, AdaptiveSelfRAGPolicy)
        assert built.policy.index_summary == index_summary(corpus, titles=3)
    assert index_summary(tiny_index.corpus, 3) != index_summary(env.index.corpus, 3)


# ---------------------------------------------------------------------------------- reporting


def test_the_summary_reports_the_trigger_rate(tiny_index, tiny_questions, canned):
    """One question's hits all irrelevant, one's mixed, one's all relevant: all fires on the
    first only, any (and CRAG) on the first two."""
    from grasp.eval.summary import summarize

    def grader():
        by_question = {
            tiny_questions[0].question: itertools.cycle(["no"]),
            tiny_questions[1].question: itertools.cycle(["yes", "no", "yes"]),
            tiny_questions[2].question: itertools.cycle(["yes"]),
        }

        def grade(request):
            asked = request.messages[-1]["content"].split("\n")[0].removeprefix("Question: ")
            return next(by_question[asked])

        return grade

    replies = {"rewrite": "", "answer": "x", "grounded": "yes", "answers": "yes"}
    rates = {}
    for name, config in [
        ("all", {"kind": "self_rag", "self_rag": settings(trigger="all", max_rewrites=1)}),
        ("any", {"kind": "self_rag", "self_rag": settings(trigger="any", max_rewrites=1)}),
        ("crag", {"kind": "crag"}),
    ]:
        _, backend = canned(grade=grader(), **replies)
        extra = summarize(run(tiny_index, tiny_questions, backend, **config)).policy_extra
        rates[name] = (extra["trigger_rate"], extra["trigger_episodes"])
    assert rates == {
        "all": (pytest.approx(1 / 3), 3),
        "any": (pytest.approx(2 / 3), 3),
        "crag": (pytest.approx(2 / 3), 3),
    }


def test_routed_away_episodes_are_not_counted_in_the_trigger_rate(
    tiny_index, tiny_questions, canned
):
    from grasp.eval.summary import summarize

    letters = iter("ABA")
    _, backend = canned(
        route=lambda r: next(letters), grade="no", answer="x", grounded="y", answers="yes"
    )
    config = settings(max_rewrites=0)
    trajectories = run(
        tiny_index,
        tiny_questions,
        backend,
        summary="S",
        kind="adaptive_self_rag",
        self_rag=config,
    )
    extra = summarize(trajectories).policy_extra
    assert extra["routes"] == {"corpus": 2 / 3, "none": 1 / 3}
    assert (extra["trigger_rate"], extra["trigger_episodes"]) == (1.0, 2)


# ---------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"trigger": "some"}, "baseline.self_rag.trigger"),
        ({"trigger_share": 1.0}, "baseline.self_rag.trigger_share"),
        ({"max_rewrites": -1}, "baseline.self_rag.max_rewrites"),
        ({"max_regenerations": -1}, "baseline.self_rag.max_regenerations"),
        ({"rewrite_search": "web"}, "baseline.self_rag.rewrite_search"),
    ],
)
def test_self_rag_settings_are_checked(fields, message):
    with pytest.raises(ValueError, match=message):
        SelfRAGSettings(**fields)


def test_what_cannot_work_is_refused(canned):
    _, backend = canned()
    with pytest.raises(ValueError, match="pass index_summary"):
        make_baseline(BaselineConfig(kind="adaptive_self_rag"), backend, EnvConfig())
    router = IndexRouterSettings(route_prompt="Question: {question}")
    config = BaselineConfig(kind="adaptive_self_rag", index_router=router)
    with pytest.raises(ValueError, match=r"must contain \['\{index_summary\}'\]"):
        make_baseline(config, backend, EnvConfig(), index_summary="S")
    other = BaselineConfig(kind="self_rag", self_rag=SelfRAGSettings(rewrite_search="other"))
    with pytest.raises(ValueError, match="keyword_search"):
        make_baseline(other, backend, EnvConfig(tools=["semantic_search", "answer"]))
    with pytest.raises(ValueError, match="hybrid is for single_step; baseline=self_rag"):
        make_baseline(BaselineConfig(kind="self_rag", search="hybrid"), backend, EnvConfig())
    with pytest.raises(ValueError, match="baseline.index_router.fallback_route"):
        IndexRouterSettings(fallback_route="web")


def _note(text: str, key: str) -> str:
    """The value of one ``[key: value]`` line of a turn's text ("" when absent)."""
    prefix = f"[{key}: "
    return next(
        (line[len(prefix) : -1] for line in text.splitlines() if line.startswith(prefix)), ""
    )
