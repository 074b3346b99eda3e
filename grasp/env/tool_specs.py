"""The JSON schema of each tool, derived from its signature; the parser's view of it; and the
one-line stand-in for the schemas when they are not in the prompt.

Each tool object (``grasp.env.tools``) holds a schema-only function named after the tool; its
type hints and Google-style docstring *are* the tool's definition (the TRL/transformers
convention): ``transformers.utils.get_json_schema`` turns them into the JSON schema that
``tokenizer.apply_chat_template(messages, tools=[tool_schema(name), ...])`` renders into the
system prompt. ``ToolSpec`` is the parser's view of the same schema (argument names, JSON types,
required flags), derived from it so that the two can never disagree. Any registered tool has
both, a tool registered outside the package included.

Usage::

    schemas = [tool_schema(name, granularity) for name in tool_names]
    allowed = tool_specs(tool_names)  # for grasp.env.parser.parse_turn

With ``citations`` (``env.citations``), answer's schema and spec come from its citing
signature (an optional ``citations`` list of sentence ids); with ``handles``
(``env.hit_labels=handles``), read_paragraph's come from its by-hit signature (one ``hit``
number); without either, every schema is the one of the tool's plain signature.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from transformers.utils import get_json_schema

from grasp.env.tools import Tool, ToolRole, get_tool
from grasp.types import Granularity

PARAGRAPH_RETURNS = "The top-K paragraphs, each with its paragraph id, title and full text."
"""What a search returns when its hits are whole paragraphs (no read tool offered)."""


class ParamSpec(NamedTuple):
    """One argument of a tool: its JSON type (``"string"``, ``"integer"``) and whether required."""

    json_type: str
    required: bool


@dataclass(frozen=True)
class ToolSpec:
    """What the parser checks a call against; derived from the tool's JSON schema."""

    name: str
    """The tool's name (a shipped tool's is its ``ToolName``)."""
    parameters: Mapping[str, ParamSpec]
    """Argument name → (JSON type, required), in the function's order. Read-only."""
    exactly_one_of: tuple[str, ...] = ()
    """Optional arguments of which a call must give exactly one (read_paragraph's two ids)."""


def _unwrap(text: str) -> str:
    """Join hard-wrapped docstring lines; keep blank lines between paragraphs."""
    return re.sub(r"(?<!\n)\n(?!\n)", " ", text)


# Keyed by the tool object, not its name: a tool registered for a test and another registered
# later under the same name must not share a schema.
@functools.cache
def _schema(tool: Tool, citations: bool = False, handles: bool = False) -> dict:
    function = tool.signature_for(citations, handles)
    schema = get_json_schema(function)
    # Docstrings are wrapped to the source's line length; the model should see flowing prose.
    body = schema["function"]
    body["description"] = _unwrap(body["description"])
    for prop in body["parameters"]["properties"].values():
        prop["description"] = _unwrap(prop["description"])
    if "description" in body.get("return", {}):
        body["return"]["description"] = _unwrap(body["return"]["description"])
    # Guards the invariant the chat template and the parser rely on: the schema's name is the
    # tool's.
    if schema["function"]["name"] != str(tool.name):
        raise AssertionError(f"tool function {function.__name__} does not match {tool.name!r}")
    return schema


def tool_schema(
    name: str,
    granularity: Granularity = Granularity.SENTENCE,
    citations: bool = False,
    handles: bool = False,
) -> dict:
    """The ``{"type": "function", "function": {...}}`` schema of a tool, for ``tools=``.

    At paragraph granularity (no read tool offered) a search says it returns whole
    paragraphs; with ``citations``, answer takes the sentence ids it rests on. Returns a
    fresh copy, so callers may modify it. ValueError for a name no tool is registered under.
    """
    tool = get_tool(name)
    schema = copy.deepcopy(_schema(tool, citations, handles))
    if granularity is Granularity.PARAGRAPH and tool.paragraph_description is not None:
        schema["function"]["description"] = tool.paragraph_description
        schema["function"].setdefault("return", {})["description"] = PARAGRAPH_RETURNS
    return schema


@functools.cache
def _tool_spec(tool: Tool, citations: bool = False, handles: bool = False) -> ToolSpec:
    parameters = _schema(tool, citations, handles)["function"]["parameters"]
    required = set(parameters.get("required", ()))
    params = {
        arg: ParamSpec(json_type=prop["type"], required=arg in required)
        for arg, prop in parameters["properties"].items()
    }
    return ToolSpec(
        name=tool.name,
        parameters=MappingProxyType(params),
        exactly_one_of=tool.exactly_one_of_for(handles),
    )


def tool_specs(
    names: Iterable[str], citations: bool = False, handles: bool = False
) -> dict[str, ToolSpec]:
    """The specs of the given tools, keyed by tool name, in the given order (duplicates once);
    with ``citations``, answer's takes its optional ``citations``; with ``handles``,
    read_paragraph takes a ``hit`` number.

    Raises ValueError on a name no tool is registered under: that is a configuration error.
    """
    specs: dict[str, ToolSpec] = {}
    for name in names:
        tool = get_tool(name)
        specs.setdefault(tool.name, _tool_spec(tool, citations, handles))
    return specs


def compact_tool_list(tools: Sequence[str], citations: bool = False, handles: bool = False) -> str:
    """One line per tool and the call format: a short stand-in for the JSON schemas (answer's
    citing line when ``citations``, read_paragraph's by-hit line when ``handles``)."""
    offered = [get_tool(name) for name in tools]
    lines = [f"- {tool.compact_for(citations, handles)}" for tool in offered]
    if not any(tool.role is ToolRole.READ for tool in offered):
        lines = [line.replace("top sentences", "top paragraphs") for line in lines]
    example = '<tool_call>\n{"name": "<tool>", "arguments": {"<argument>": <value>}}\n</tool_call>'
    return "Tools:\n" + "\n".join(lines) + "\nCall format:\n" + example
