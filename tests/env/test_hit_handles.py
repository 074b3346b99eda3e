"""env.hit_labels=handles and env.repair_calls: hits a small model can read by one number,
and calls that survive a copied quote or label (the strict format stays measurable)."""

from __future__ import annotations

import json

import pytest

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.env.parser import parse_turn
from grasp.env.tool_specs import tool_schema, tool_specs
from grasp.env.tools import tool_names
from grasp.reward import DEFAULT_REWARD_CONFIG, RewardConfig, compute_reward
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.scripted import HeuristicSearchPolicy, tool_call_text
from grasp.rollout.trajectory import Trajectory
from grasp.types import Granularity, ParseErrorKind, RefusalKind, ToolName

HANDLES = {"hit_labels": "handles", "top_k": 2}


def _env(tiny_index, **overrides):
    return RetrievalEnvironment(tiny_index, EnvConfig(**{**HANDLES, **overrides}))


def _step(env, episode, name, **arguments):
    return env.step([episode], [tool_call_text(name, **arguments)])[0]


def test_hits_are_numbered_per_episode_and_a_sentence_keeps_its_number(tiny_index, tiny_questions):
    env = _env(tiny_index)
    episode = env.reset(tiny_questions[0])
    first = _step(env, episode, "semantic_search", query="capital of Poland")
    hits = episode.turns[-1].hits
    lines = first.splitlines()
    assert lines[0] == 'semantic_search("capital of Poland"):'
    corpus = tiny_index.corpus
    for line, hit, number in zip(lines[1:3], hits, (1, 2), strict=True):
        title = corpus.title(hit["paragraph_id"])
        assert line.startswith(f"[{number}] {title} | ")
        assert hit["handle"] == number
    second = _step(env, episode, "keyword_search", query="capital of Poland")
    again = episode.turns[-1].hits
    order = list(dict.fromkeys(h["sentence_id"] for h in hits + again))
    for hit in hits + again:  # numbered in first-shown order; a sentence keeps its number
        assert hit["handle"] == order.index(hit["sentence_id"]) + 1
        assert f"[{hit['handle']}] " in (first if hit in hits else second)
    assert [s for s, _ in episode.hit_handles] == list(
        dict.fromkeys(h["sentence_id"] for h in hits + again)
    )


def test_a_read_by_handle_expands_that_hits_sentence_to_its_paragraph(tiny_index, tiny_questions):
    env = _env(tiny_index)
    episode = env.reset(tiny_questions[0])
    _step(env, episode, "semantic_search", query="capital of Poland")
    sentence_id, paragraph_id = episode.hit_handles[1]
    corpus = tiny_index.corpus
    observation = _step(env, episode, "read_paragraph", hit=2)
    assert corpus.paragraph_of(sentence_id) == paragraph_id
    title = corpus.title(paragraph_id)
    assert observation.startswith(f"read_paragraph [2] {title}:\n")
    assert "(s" not in observation.split("\n")[1]  # no ids to copy from a paragraph
    assert episode.read_paragraph_ids == {paragraph_id}
    assert episode.turns[-1].read == {
        "hit": 2,
        "sentence_id": sentence_id,
        "paragraph_id": paragraph_id,
    }
    assert episode.turns[-1].error is None


@pytest.mark.parametrize(
    ("searched", "message"), [(True, "yours are [1] to [2]"), (False, "search first")]
)
def test_a_handle_never_shown_is_refused_naming_the_range(
    tiny_index, tiny_questions, searched, message
):
    env = _env(tiny_index)
    episode = env.reset(tiny_questions[0])
    if searched:
        _step(env, episode, "semantic_search", query="capital of Poland")
    observation = _step(env, episode, "read_paragraph", hit=3)
    assert "there is no search result [3]" in observation and message in observation
    assert episode.turns[-1].error is RefusalKind.INVALID_CALL
    assert episode.read_paragraph_ids == set() and episode.turns[-1].read is None


def test_handles_change_read_paragraphs_schema_prompt_and_spec_only():
    by_hit = tool_schema(ToolName.READ_PARAGRAPH, Granularity.SENTENCE, handles=True)["function"]
    assert by_hit["name"] == "read_paragraph"
    assert by_hit["parameters"]["properties"]["hit"]["type"] == "integer"
    assert by_hit["parameters"]["required"] == ["hit"]
    spec = tool_specs([ToolName.READ_PARAGRAPH], handles=True)[ToolName.READ_PARAGRAPH]
    assert list(spec.parameters) == ["hit"] and spec.exactly_one_of == ()
    for name in (ToolName.SEMANTIC_SEARCH, ToolName.KEYWORD_SEARCH, ToolName.ANSWER):
        assert tool_schema(name, handles=True) == tool_schema(name)


def test_the_prompt_tells_how_to_read_by_number(tiny_index):
    env = _env(tiny_index, schemas_in_prompt=False)
    assert '{"hit": 3}' in env.system_prompt and "[s<sentence id>" not in env.system_prompt
    assert "- read_paragraph(hit): the whole paragraph of search result [hit]" in env.system_prompt


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"citations": True}, "env.citations"),
        ({"demonstration": True}, "env.demonstration"),
        ({"tools": ["semantic_search", "answer"]}, "env.hit_labels=handles labels sentence hits"),
        ({"hit_labels": "numbers"}, "env.hit_labels"),
    ],
)
def test_handles_refuse_what_shows_ids_naming_the_field(overrides, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[")):
        EnvConfig(**{**HANDLES, **overrides})


QUOTED_QUESTION = (
    '<tool_call>\n{"name": "semantic_search", "arguments": {"query": "Who wrote "The Hobbit"?"}}'
    "\n</tool_call>"
)
BRACES = '<tool_call>\n{"name": "answer", "arguments": {"answer": "Paris"}}}}\n</tool_call>'
BRACKET = '<tool_call>\n{"name": "answer", "arguments": {"answer": "Paris"]\n</tool_call>'
SPECS = tool_specs(tool_names())
HANDLE_SPECS = tool_specs(tool_names(), handles=True)


@pytest.mark.parametrize(
    ("text", "call"),
    [
        (QUOTED_QUESTION, ("semantic_search", {"query": 'Who wrote "The Hobbit"?'})),
        (BRACES, ("answer", {"answer": "Paris"})),
        (BRACKET, ("answer", {"answer": "Paris"})),
    ],
)
def test_undecodable_json_with_a_clear_intent_is_repaired_and_marked(text, call):
    strict = parse_turn(text, SPECS)
    assert strict.error.kind is ParseErrorKind.MALFORMED_JSON and not strict.repaired
    repaired = parse_turn(text, SPECS, repair=True)
    assert repaired.error is None and repaired.repaired
    assert (str(repaired.call.name), repaired.call.arguments) == call


@pytest.mark.parametrize(
    ("specs", "arguments", "expected"),
    [
        (HANDLE_SPECS, {"hit": "[3]"}, {"hit": 3}),
        (SPECS, {"sentence_id": "s12"}, {"sentence_id": 12}),
        (SPECS, {"sentence_id": "15476 p4251"}, {"sentence_id": 15476}),
        (SPECS, {"paragraph_id": "[p19]"}, {"paragraph_id": 19}),
    ],
)
def test_an_id_copied_as_its_label_reads_as_the_first_number(specs, arguments, expected):
    text = tool_call_text("read_paragraph", **arguments)
    assert parse_turn(text, specs).error.kind is ParseErrorKind.INVALID_ARGUMENT
    repaired = parse_turn(text, specs, repair=True)
    assert repaired.call.arguments == expected and repaired.repaired


@pytest.mark.parametrize(
    "text",
    [
        tool_call_text("read_paragraph", sentence_id=12),
        tool_call_text("read_paragraph", sentence_id="12"),  # quoted digits were always read
        tool_call_text("answer", answer='a "quoted" answer'),
    ],
)
def test_a_call_that_parses_strictly_is_not_marked_repaired(text):
    assert parse_turn(text, SPECS, repair=True) == parse_turn(text, SPECS)
    assert not parse_turn(text, SPECS, repair=True).repaired


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>\nnot json at all\n</tool_call>",
        tool_call_text("read_paragraph", sentence_id="the second one"),
        tool_call_text("read_paragraph", sentence_id="-3"),
    ],
)
def test_what_has_no_clear_intent_stays_an_error(text):
    assert parse_turn(text, SPECS, repair=True).error is not None


def test_repaired_turns_and_reads_are_recorded_in_the_trajectory(tiny_index, tiny_questions):
    env = _env(tiny_index, repair_calls=True, turn_budget=4)
    episode = env.reset(tiny_questions[0])
    _step(env, episode, "semantic_search", query="capital of Poland")
    env.step(
        [episode],
        ['<tool_call>\n{"name": "read_paragraph", "arguments": {"hit": "[1]"}}}}\n</tool_call>'],
    )
    env.step([episode], [tool_call_text("answer", answer="Warsaw")])

    trajectory = Trajectory.from_episode(
        episode, compute_reward(episode.evidence(), RewardConfig()), None
    )
    turns = trajectory.to_json()["turns"]
    assert ["read" in t for t in turns] == [False, True, False]
    assert [t.get("repaired", False) for t in turns] == [False, True, False]
    assert turns[1]["read"]["hit"] == 1
    assert Trajectory.from_json(json.loads(json.dumps(trajectory.to_json()))) == trajectory


def test_the_heuristic_plan_reads_by_handle_and_every_read_runs(tiny_index, tiny_questions):
    env = _env(tiny_index, turn_budget=6)
    plan = ["semantic_search", "keyword_search", "read_paragraph", "read_paragraph", "answer"]
    engine = RolloutEngine(env, HeuristicSearchPolicy(plan=plan), RolloutConfig(group_size=1))
    batch = engine.run(list(tiny_questions))
    for trajectory in batch.scored(DEFAULT_REWARD_CONFIG):
        reads = [t for t in trajectory.turns if t.call and t.call["name"] == "read_paragraph"]
        assert reads and all(t.error is None and t.read is not None for t in reads)
        hits = [t.call["arguments"]["hit"] for t in reads]
        assert hits[0] == 1 and hits == sorted(set(hits))  # the first unread hit each time
        read = [t.read["paragraph_id"] for t in reads]
        assert len(set(read)) == len(read)  # a paragraph already read is not read again
        assert set(trajectory.read_paragraph_ids) == set(read)


@pytest.mark.parametrize("value", ["1.9", "2 or 1", "1, 2", "3rd", "[1] or [2]", "s12 and s13"])
def test_a_handle_or_id_that_is_not_one_integer_is_refused_even_with_repair(value):
    """Issue 48 (minor): repair read "1.9" as hit 1 and "2 or 1" as hit 2, while the number 1.5
    was refused. A label copied whole is repaired; anything else that is not one integer is
    refused, as 1.5 is."""
    for specs, argument in ((HANDLE_SPECS, "hit"), (SPECS, "sentence_id")):
        turn = parse_turn(tool_call_text("read_paragraph", **{argument: value}), specs, repair=True)
        assert turn.call is None and not turn.repaired
        assert turn.error.kind is ParseErrorKind.INVALID_ARGUMENT
        assert f"{argument} must be an integer id, got {json.dumps(value)}" in turn.error.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [("[3]", 3), (" [ 3 ] ", 3), ("s12", 12), ("[s15476 p4251]", 15476), ('[p19 "Alien"]', 19)],
)
def test_a_label_copied_whole_still_reads_as_its_id(value, expected):
    turn = parse_turn(tool_call_text("read_paragraph", sentence_id=value), SPECS, repair=True)
    assert turn.call.arguments == {"sentence_id": expected} and turn.repaired


def test_a_repair_that_yields_no_valid_call_is_recorded_as_malformed_json():
    """Issue 48 (minor): json-repair reads ``{name: semantic_search query: foo}`` as the tool
    name "semantic_search query: foo"; the call is malformed JSON, not an unknown tool."""
    text = "<tool_call>\n{name: semantic_search query: foo}\n</tool_call>"
    strict = parse_turn(text, SPECS)
    repaired = parse_turn(text, SPECS, repair=True)
    assert strict.error.kind is ParseErrorKind.MALFORMED_JSON
    assert repaired == strict and not repaired.repaired
