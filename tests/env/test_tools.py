"""Each tool object on its own: its name, its role, its evidence (D_s, D_k, D_r) and its
refusals; and the registry's own rules (``grasp.env.tools.registry``)."""

from __future__ import annotations

import pytest

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.env.episode import INVALID_CALL, TurnRecord
from grasp.env.parser import ToolCall
from grasp.env.tool_specs import tool_schema
from grasp.env.tools import (
    TOOLS,
    SearchTool,
    ToolRole,
    default_tool_names,
    get_tool,
    register_tool,
    registered,
    tool_names,
    tools_with,
)
from grasp.types import Granularity, StopReason, ToolName

SHIPPED = ("semantic_search", "keyword_search", "read_paragraph", "search", "answer")


def test_the_registry_holds_the_shipped_tools_each_named_after_its_signature():
    assert tool_names() == SHIPPED and list(TOOLS) == list(SHIPPED)
    for name, tool in TOOLS.items():
        assert tool.name == name and tool.signature.__name__ == name
        assert type(tool.name) is ToolName  # a shipped tool's name is its constant
    assert tools_with(ToolRole.SEARCH) == ("semantic_search", "keyword_search", "search")
    assert all(isinstance(TOOLS[name], SearchTool) for name in tools_with(ToolRole.SEARCH))
    assert tools_with(ToolRole.READ) == ("read_paragraph",)
    assert tools_with(ToolRole.ANSWER) == ("answer",)
    assert default_tool_names() == ["semantic_search", "keyword_search", "read_paragraph", "answer"]


def test_each_shipped_tool_records_its_own_evidence_kind():
    assert {name: tool.evidence for name, tool in TOOLS.items()} == {
        "semantic_search": "semantic",
        "keyword_search": "keyword",
        "read_paragraph": "read",
        "search": "semantic",  # Search-R1's search counts as semantic search (D_s)
        "answer": None,
    }


def test_the_registry_refuses_a_taken_name_and_an_unknown_one():
    with pytest.raises(ValueError, match="'answer' is already registered"):
        register_tool(TOOLS["answer"])
    with pytest.raises(ValueError, match="env.tools='teleport' is not one of: semantic_search,"):
        get_tool("teleport", "env.tools")
    with pytest.raises(TypeError):
        TOOLS["teleport"] = TOOLS["answer"]  # type: ignore[index]  # a read-only view


def test_registered_unregisters_even_when_the_block_raises():
    class Echo(SearchTool):
        name = "echo"
        compact = "echo(query)"
        evidence = "echo"

        @staticmethod
        def echo(query: str) -> str:
            """Echo.

            Args:
                query: Anything.
            """
            raise NotImplementedError

    with pytest.raises(RuntimeError), registered(Echo()):
        assert tool_names() == (*SHIPPED, "echo")
        raise RuntimeError("inside the block")
    assert tool_names() == SHIPPED


@pytest.mark.parametrize(
    ("evidence", "problem"),
    [("gold", "evidence kind 'gold'"), ("Has Space", "evidence kind 'Has Space'")],
)
def test_a_tool_may_not_record_an_evidence_kind_a_trajectory_cannot_name(evidence, problem):
    class Bad(SearchTool):
        name = "bad"
        compact = "bad(query)"

        @staticmethod
        def bad(query: str) -> str:
            """Bad.

            Args:
                query: Anything.
            """
            raise NotImplementedError

    Bad.evidence = evidence
    with pytest.raises(ValueError, match=problem):
        register_tool(Bad())
    assert "bad" not in TOOLS


def test_a_tool_needs_a_signature_named_after_it():
    class Nameless(SearchTool):
        name = "nameless"
        compact = "nameless(query)"
        evidence = "semantic"

    with pytest.raises(ValueError, match="needs a signature method named 'nameless'"):
        register_tool(Nameless())
    assert "nameless" not in TOOLS


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
    [(ToolName.SEMANTIC_SEARCH, "semantic"), (ToolName.KEYWORD_SEARCH, "keyword")],
)
def test_each_search_adds_its_hits_to_its_own_evidence_set(
    tiny_index, tiny_questions, tool, evidence
):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2))
    episode = env.reset(tiny_questions[0])
    observation = _run(env, episode, tool, query="capital of Poland")
    hit_paragraphs = {hit["paragraph_id"] for hit in episode.turns[-1].hits}
    assert observation.startswith(f'{tool}("capital of Poland"):') and len(hit_paragraphs) >= 1
    assert episode.evidence_ids == {
        kind: hit_paragraphs if kind == evidence else set()
        for kind in ("semantic", "keyword", "read")
    }
    assert getattr(episode, f"{evidence}_paragraph_ids") == hit_paragraphs
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


def test_the_tools_and_their_schemas_never_import_the_parser():
    """The parser imports the schemas and the tools; neither imports it back, not even for a
    type hint (``ToolCall`` lives with the tools), so there is no import circle."""
    import ast
    from pathlib import Path

    import grasp.env

    env_dir = Path(grasp.env.__file__).parent
    sources = [env_dir / "tool_specs.py", env_dir / "episode.py", *(env_dir / "tools").glob("*.py")]
    imported = {}
    for path in sources:
        tree = ast.parse(path.read_text())
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported[path.name] = sorted(m for m in modules if m and m.startswith("grasp.env"))
    assert len(sources) == 7
    assert not [name for name, modules in imported.items() if "grasp.env.parser" in modules]
    assert imported["tool_specs.py"] == ["grasp.env.tools"]
