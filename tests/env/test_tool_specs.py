"""Tests of grasp.env.tool_specs: schemas from the tool functions, specs derived from them, and
their rendering through TRL's Qwen2.5 chat template."""

from __future__ import annotations

import json
import re

import pytest

from grasp.env.tool_specs import ParamSpec, ToolSpec, tool_schema, tool_specs
from grasp.env.tools import TOOLS, tool_names
from grasp.types import ToolName

GRASP_TOOLS = (
    ToolName.SEMANTIC_SEARCH,
    ToolName.KEYWORD_SEARCH,
    ToolName.READ_PARAGRAPH,
    ToolName.ANSWER,
)


def test_every_registered_tool_has_a_function_named_after_it():
    assert tool_names() == (
        "semantic_search",
        "keyword_search",
        "read_paragraph",
        "search",
        "answer",
    )
    for name, tool in TOOLS.items():
        assert tool.signature.__name__ == name


@pytest.mark.parametrize("name", tool_names())
def test_tool_functions_are_schema_only(name):
    kwargs = {"sentence_id": 1} if name == ToolName.READ_PARAGRAPH else {}
    args = () if kwargs else ("x",)
    with pytest.raises(NotImplementedError):
        TOOLS[name].signature(*args, **kwargs)


@pytest.mark.parametrize(
    "name, properties, required",
    [
        (ToolName.SEMANTIC_SEARCH, {"query": "string"}, ["query"]),
        (ToolName.KEYWORD_SEARCH, {"query": "string"}, ["query"]),
        (ToolName.READ_PARAGRAPH, {"sentence_id": "integer", "paragraph_id": "integer"}, []),
        (ToolName.SEARCH, {"query": "string"}, ["query"]),
        (ToolName.ANSWER, {"answer": "string"}, ["answer"]),
    ],
)
def test_schema_shape(name, properties, required):
    schema = tool_schema(name)
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == name
    assert function["description"]
    params = function["parameters"]
    assert params["type"] == "object"
    assert {arg: prop["type"] for arg, prop in params["properties"].items()} == properties
    assert params.get("required", []) == required
    for prop in params["properties"].values():
        assert prop["description"]


def test_optional_int_ids_are_nullable_integers_in_transformers():
    # `int | None = None` must come out as an optional integer, not a union or a string.
    props = tool_schema(ToolName.READ_PARAGRAPH)["function"]["parameters"]["properties"]
    for arg in ("sentence_id", "paragraph_id"):
        assert props[arg]["type"] == "integer"
        assert props[arg]["nullable"] is True


@pytest.mark.parametrize(
    "name, returns",
    [
        (ToolName.SEMANTIC_SEARCH, ["sentence id", "paragraph id", "title"]),
        (ToolName.KEYWORD_SEARCH, ["sentence id", "paragraph id", "title"]),
        (ToolName.READ_PARAGRAPH, ["title", "sentence id"]),
        (ToolName.SEARCH, ["paragraph id", "title"]),
    ],
)
def test_schema_tells_the_model_what_the_tool_returns(name, returns):
    description = tool_schema(name)["function"]["return"]["description"]
    for phrase in returns:
        assert phrase in description


def test_read_paragraph_description_states_the_exactly_one_rule():
    assert (
        "exactly one of sentence_id or paragraph_id"
        in (tool_schema(ToolName.READ_PARAGRAPH)["function"]["description"])
    )


def test_descriptions_have_no_hard_wrapped_lines():
    for name in tool_names():
        function = tool_schema(name)["function"]
        texts = [function["description"], function["return"]["description"]]
        texts += [p["description"] for p in function["parameters"]["properties"].values()]
        for text in texts:
            assert not re.search(r"(?<!\n)\n(?!\n)", text), text


def test_tool_schema_returns_a_copy():
    schema = tool_schema(ToolName.ANSWER)
    schema["function"]["name"] = "changed"
    assert tool_schema(ToolName.ANSWER)["function"]["name"] == "answer"


def test_tool_schema_accepts_plain_strings():
    assert tool_schema("answer") == tool_schema(ToolName.ANSWER)


def test_tool_specs_are_derived_from_schemas():
    specs = tool_specs(tool_names())
    for name in tool_names():
        params = tool_schema(name)["function"]["parameters"]
        required = set(params.get("required", []))
        spec = specs[name]
        assert spec.name == name and spec.name is TOOLS[name].name
        assert list(spec.parameters) == list(params["properties"])
        for arg, prop in params["properties"].items():
            assert spec.parameters[arg] == ParamSpec(prop["type"], arg in required)


def test_tool_specs_values():
    specs = tool_specs([ToolName.READ_PARAGRAPH, ToolName.ANSWER])
    assert specs == {
        "read_paragraph": ToolSpec(
            name=ToolName.READ_PARAGRAPH,
            parameters={
                "sentence_id": ParamSpec("integer", False),
                "paragraph_id": ParamSpec("integer", False),
            },
            exactly_one_of=("sentence_id", "paragraph_id"),
        ),
        "answer": ToolSpec(name=ToolName.ANSWER, parameters={"answer": ParamSpec("string", True)}),
    }


def test_tool_specs_keep_order_and_drop_duplicates():
    specs = tool_specs(["answer", ToolName.SEMANTIC_SEARCH, "answer"])
    assert list(specs) == ["answer", "semantic_search"]
    assert all(isinstance(key, ToolName) for key in specs)


def test_tool_specs_are_read_only():
    spec = tool_specs([ToolName.ANSWER])["answer"]
    with pytest.raises(TypeError):
        spec.parameters["extra"] = ParamSpec("string", False)  # type: ignore[index]


def test_tool_specs_reject_unknown_names():
    with pytest.raises(ValueError):
        tool_specs(["search_web"])


def _render_system_prompt(names):
    chat_template_utils = pytest.importorskip("trl.chat_template_utils")
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[[{"role": "user", "content": "Who directed Alien?"}]],
        tools=[tool_schema(name) for name in names],
        chat_template=chat_template_utils.qwen2_5_chat_template,
        add_generation_prompt=True,
    )
    return rendered[0]


def test_schemas_render_through_the_qwen2_5_template():
    prompt = _render_system_prompt(GRASP_TOOLS)
    system = prompt.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\n")
    assert "<tools>" in system and "</tools>" in system
    assert "<tool_call>" in system and "</tool_call>" in system
    assert '"arguments": <args-json-object>' in system
    for name in GRASP_TOOLS:
        assert f'"name": "{name.value}"' in system
    assert '"name": "search"' not in system
    assert prompt.endswith("<|im_start|>assistant\n")


def test_rendered_tool_lines_are_the_schemas():
    prompt = _render_system_prompt(GRASP_TOOLS)
    block = prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    assert [json.loads(line) for line in block.split("\n")] == [
        tool_schema(name) for name in GRASP_TOOLS
    ]
