"""env.citations: answer's optional sentence ids, its schema and prompt only when on, the
citations an episode records (invalid ones counted, never a crash), and the trajectory."""

from __future__ import annotations

import hashlib
import json

import pytest

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.env.episode import Citations
from grasp.env.observations import CITATIONS_HINT
from grasp.env.tool_specs import ParamSpec, tool_schema
from grasp.env.tools import citation_id
from grasp.reward import compute_reward
from grasp.rollout.scripted import tool_call_text
from grasp.rollout.trajectory import Trajectory
from grasp.types import Granularity, StopReason, ToolName

GRASP = ["semantic_search", "keyword_search", "read_paragraph", "answer"]
SEARCH_R1 = ["search", "answer"]

TODAY = {
    (tuple(GRASP), True): "017c580b0e1bea4b22c7358ce47c96ac54dae7ba3b0d17955b8d446f9c881f21",
    (tuple(GRASP), False): "dffe8850165bc6747cbd0a8334067ba198ce3b10bd017de2686e2af85e9ca9c9",
    (tuple(SEARCH_R1), True): "4789189f1abe0f3279c2a927e5c0381751a8fe641f4e35d8b838c286a05344f7",
    (tuple(SEARCH_R1), False): "28ecb4d85d29d81046d782a670385baa711a477f0000cd6ab1792058583031bd",
}
"""The system prompt, schemas and parser specs of each tool set before env.citations existed
(computed at commit e028327): with the option off they must stay exactly these."""


def _digest(env: RetrievalEnvironment) -> str:
    specs = {
        str(name): {arg: list(param) for arg, param in spec.parameters.items()}
        for name, spec in env.specs.items()
    }
    blob = {"prompt": env.system_prompt, "schemas": env.tool_schemas, "specs": specs}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("tools", [GRASP, SEARCH_R1])
@pytest.mark.parametrize("schemas_in_prompt", [True, False])
def test_off_the_prompt_schemas_and_specs_are_byte_for_byte_todays(
    tiny_index, tools, schemas_in_prompt
):
    config = EnvConfig(tools=tools, top_k=2, schemas_in_prompt=schemas_in_prompt)
    assert config.citations is False  # off by default, as in the paper's configuration
    env = RetrievalEnvironment(tiny_index, config)
    assert _digest(env) == TODAY[(tuple(tools), schemas_in_prompt)]
    assert "citations" not in env.system_prompt + json.dumps(env.tool_schemas)


def test_on_only_answer_takes_citations_and_the_prompt_asks_for_them(tiny_index):
    off = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, schemas_in_prompt=False))
    on = RetrievalEnvironment(
        tiny_index, EnvConfig(top_k=2, schemas_in_prompt=False, citations=True)
    )
    answer = on.tool_schemas[-1]["function"]
    assert answer["name"] == "answer"
    assert answer["parameters"]["required"] == ["answer"]
    citations = answer["parameters"]["properties"]["citations"]
    assert citations["type"] == "array" and citations["items"] == {"type": "integer"}
    assert answer["description"] == tool_schema(ToolName.ANSWER)["function"]["description"]
    assert on.tool_schemas[:-1] == off.tool_schemas[:-1]
    assert on.specs["answer"].parameters["citations"] == ParamSpec("array", required=False)
    assert {k: v for k, v in on.specs.items() if k != "answer"} == {
        k: v for k, v in off.specs.items() if k != "answer"
    }
    plain, listing = off.system_prompt.split("\n\n")
    assert on.system_prompt.startswith(f"{plain} {CITATIONS_HINT}\n\n")
    assert "- answer(answer): final short answer; ends the episode" in listing
    assert "- answer(answer, citations): final short answer, optionally with the list of " in (
        on.system_prompt
    )


def test_citations_need_sentence_ids(tiny_index):
    with pytest.raises(ValueError, match="env.citations"):
        RetrievalEnvironment(tiny_index, EnvConfig(tools=SEARCH_R1, top_k=2, citations=True))


@pytest.fixture
def shown(tiny_index, tiny_questions):
    """An episode with citations on after one keyword search, and the sentence ids shown."""
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, turn_budget=4, citations=True))
    episode = env.reset(tiny_questions[0])
    env.step([episode], [tool_call_text("keyword_search", query="capital of Poland")])
    ids = [hit["sentence_id"] for hit in episode.turns[-1].hits]
    return env, episode, ids


def _unshown(env, episode) -> int:
    """A sentence of the corpus that the episode was never shown."""
    count = env.index.corpus.num_units(Granularity.SENTENCE)
    return next(s for s in range(count) if s not in episode.shown_sentence_ids)


def test_valid_citations_are_recorded_in_order_each_once(shown):
    env, episode, ids = shown
    first, second = ids
    given = [second, f"s{first}", str(second), float(first)]
    (observation,) = env.step([episode], [tool_call_text("answer", answer="x", citations=given)])
    assert observation is None and episode.stop_reason is StopReason.ANSWERED
    assert episode.citations == Citations((second, first), invalid=0)
    assert episode.turns[-1].error is None
    assert episode.turns[-1].call["arguments"]["citations"] == given  # as the model wrote them


def test_an_answer_without_citations_records_that_it_cited_none(shown):
    env, episode, _ = shown
    env.step([episode], [tool_call_text("answer", answer="x")])
    assert episode.citations == Citations((), invalid=0)


@pytest.mark.parametrize(
    "citations, valid, invalid",
    [
        ("s3", 0, 1),  # not a list: one invalid citation
        (7, 0, 1),
        ({"s": 3}, 0, 1),
        ([True, -1, 2.5, "two", None, [1]], 0, 6),  # not integer ids
        (["UNSHOWN", 10**9], 0, 2),  # a sentence never shown; no such sentence
        (["FIRST", "UNSHOWN"], 1, 1),  # the valid one is kept
    ],
)
def test_malformed_citations_are_counted_invalid_and_the_answer_still_ends_the_episode(
    shown, citations, valid, invalid
):
    env, episode, ids = shown
    swap = {"UNSHOWN": _unshown(env, episode), "FIRST": ids[0]}
    if isinstance(citations, list):
        citations = [swap.get(c, c) if isinstance(c, str) else c for c in citations]
    env.step([episode], [tool_call_text("answer", answer="Warsaw", citations=citations)])
    assert episode.stop_reason is StopReason.ANSWERED and episode.answer == "Warsaw"
    assert episode.turns[-1].error is None and not episode.errors
    assert episode.citations == Citations(tuple(ids[:valid]), invalid=invalid)


def test_null_citations_are_no_citations(shown):
    env, episode, _ = shown
    env.step([episode], [tool_call_text("answer", answer="x", citations=None)])
    assert episode.citations == Citations((), invalid=0)


@pytest.mark.parametrize(
    "entry, expected",
    [(12, 12), (12.0, 12), ("12", 12), (" s12 ", 12), ("[s12]", 12), ("p12", None)]
    + [(-1, None), (True, None), ("s-1", None), ("1" * 19, None), (None, None), ([12], None)],
)
def test_citation_ids_as_models_write_them(entry, expected):
    assert citation_id(entry) == expected


def test_off_a_citations_argument_is_an_unexpected_argument(tiny_index, tiny_questions):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, turn_budget=4))
    episode = env.reset(tiny_questions[0])
    (observation,) = env.step([episode], [tool_call_text("answer", answer="x", citations=[1])])
    assert episode.turns[-1].error == "unexpected_argument" and not episode.done
    assert 'unexpected argument "citations"' in observation
    env.step([episode], [tool_call_text("answer", answer="x")])
    assert episode.citations is None


def test_the_trajectory_records_citations_and_reads_them_back(shown):
    env, episode, ids = shown
    env.step([episode], [tool_call_text("answer", answer="x", citations=[ids[0], 10**9])])
    trajectory = Trajectory.from_episode(episode, compute_reward(episode.evidence()), None)
    data = json.loads(json.dumps(trajectory.to_json()))
    assert data["citations"] == {"sentence_ids": [ids[0]], "invalid": 1}
    assert list(data)[-1] == "citations"
    read_back = Trajectory.from_json(data)
    assert read_back == trajectory and read_back.citations == Citations((ids[0],), invalid=1)
    assert read_back.to_json() == data


def test_a_trajectory_without_citations_is_written_as_before(tiny_index, tiny_questions):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, turn_budget=4))
    episode = env.reset(tiny_questions[0])
    env.step([episode], [tool_call_text("answer", answer="x")])
    trajectory = Trajectory.from_episode(episode, compute_reward(episode.evidence()), None)
    data = trajectory.to_json()
    assert "citations" not in data and list(data)[-1] == "extra"
    line = json.dumps(data)
    assert json.dumps(Trajectory.from_json(json.loads(line)).to_json()) == line
