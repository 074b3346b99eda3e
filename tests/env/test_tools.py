"""Each tool object on its own: its name, its evidence (D_s, D_k, D_r) and its refusals."""

from __future__ import annotations

import pytest

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.env.episode import INVALID_CALL, TurnRecord
from grasp.env.parser import ToolCall
from grasp.env.tool_specs import tool_schema
from grasp.env.tools import SEARCH_TOOLS, TOOLS, SearchTool
from grasp.types import Granularity, StopReason, ToolName


def test_every_tool_name_has_one_tool_object_named_after_it():
    assert list(TOOLS) == list(ToolName)
    for name, tool in TOOLS.items():
        assert tool.name is name and tool.signature.__name__ == name.value
    assert SEARCH_TOOLS == (ToolName.SEMANTIC_SEARCH, ToolName.KEYWORD_SEARCH, ToolName.SEARCH)
    assert all(isinstance(TOOLS[name], SearchTool) for name in SEARCH_TOOLS)


def test_paragraph_granularity_schemas_say_searches_return_paragraphs():
    semantic = tool_schema(ToolName.SEMANTIC_SEARCH, Granularity.PARAGRAPH)["function"]
    assert semantic["description"] == (
        "Search the corpus for whole paragraphs whose meaning is closest to the query. Good for "
        "paraphrased or descriptive questions."
    )
    assert semantic["return"]["description"] == (
        "The top-K paragraphs, each with its paragraph id, title and full text."
    )
    # A tool without a paragraph wording keeps its own schema.
    for name in (ToolName.SEARCH, ToolName.ANSWER, ToolName.READ_PARAGRAPH):
        assert tool_schema(name, Granularity.PARAGRAPH) == tool_schema(name)


def _run(env, episode, name, **arguments):
    """One call dispatched straight to its tool object, as ``env.step`` does."""
    episode.turns.append(TurnRecord(text=""))
    call = ToolCall(name, arguments)
    episode.record_call(call)
    return TOOLS[name].run([episode], [call], env.context)[0]


@pytest.mark.parametrize(
    ("tool", "evidence"),
    [
        (ToolName.SEMANTIC_SEARCH, "semantic_paragraph_ids"),
        (ToolName.KEYWORD_SEARCH, "keyword_paragraph_ids"),
    ],
)
def test_each_search_adds_its_hits_to_its_own_evidence_set(
    tiny_index, tiny_questions, tool, evidence
):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2))
    episode = env.reset(tiny_questions[0])
    observation = _run(env, episode, tool, query="capital of Poland")
    hit_paragraphs = {hit["paragraph_id"] for hit in episode.turns[-1].hits}
    assert observation.startswith(f'{tool}("capital of Poland"):') and len(hit_paragraphs) >= 1
    sets = ("semantic_paragraph_ids", "keyword_paragraph_ids", "read_paragraph_ids")
    assert {name: getattr(episode, name) for name in sets} == {
        name: hit_paragraphs if name == evidence else set() for name in sets
    }
    assert episode.shown_paragraph_ids == hit_paragraphs


def test_read_paragraph_refuses_an_unseen_id_and_reads_a_shown_one(tiny_index, tiny_questions):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2))
    episode = env.reset(tiny_questions[0])
    refused = _run(env, episode, ToolName.READ_PARAGRAPH, paragraph_id=0)
    assert refused == (
        "Error: paragraph p0 was not in your search results. Read a sentence or paragraph id "
        "from a search result."
    )
    assert episode.turns[-1].error == INVALID_CALL and episode.read_paragraph_ids == set()
    _run(env, episode, ToolName.KEYWORD_SEARCH, query="capital of Poland")
    shown = episode.turns[-1].hits[0]
    read = _run(env, episode, ToolName.READ_PARAGRAPH, sentence_id=shown["sentence_id"])
    assert read.startswith(f"read_paragraph p{shown['paragraph_id']} ")
    assert episode.read_paragraph_ids == {shown["paragraph_id"]}


def test_answer_ends_the_episode_without_an_observation(tiny_index, tiny_questions):
    env = RetrievalEnvironment(tiny_index, EnvConfig(final_message="error"))
    episode = env.reset(tiny_questions[0])
    assert _run(env, episode, ToolName.ANSWER, answer="Warsaw") is None
    assert (episode.answer, episode.stop_reason) == ("Warsaw", StopReason.ANSWERED)
