"""The tools a policy can call, defined once as typed, documented Python functions.

Each function's signature and Google-style docstring *are* the tool's definition (the
TRL/transformers convention): ``transformers.utils.get_json_schema`` turns them into the JSON
schema that ``tokenizer.apply_chat_template(messages, tools=[tool_schema(name), ...])`` renders
into the system prompt. The bodies do nothing: the environment implements the behaviour.
``ToolSpec`` is the parser's view of the same schema (argument names, JSON types, required
flags), derived from it so that the two can never disagree.

Usage::

    schemas = [tool_schema(name) for name in tool_names]
    allowed = tool_specs(tool_names)  # for grasp.env.parser.parse_turn
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from transformers.utils import get_json_schema

from grasp.types import ToolName

_SCHEMA_ONLY = "schema only: the grasp environment implements this tool"


def semantic_search(query: str) -> str:
    """Search the corpus for single sentences whose meaning is closest to the query.

    Good for paraphrased or descriptive questions. Read a hit's whole paragraph with
    read_paragraph when one sentence is not enough.

    Args:
        query: What to look for, as a short natural-language question or statement.

    Returns:
        The top-K sentences, each with its sentence id, paragraph id and paragraph title.
    """
    raise NotImplementedError(_SCHEMA_ONLY)


def keyword_search(query: str) -> str:
    """Search the corpus for single sentences that share the most words with the query (BM25).

    Good for exact names, titles, dates and rare terms. Read a hit's whole paragraph with
    read_paragraph when one sentence is not enough.

    Args:
        query: The keywords to match, e.g. a name plus a distinctive term.

    Returns:
        The top-K sentences, each with its sentence id, paragraph id and paragraph title.
    """
    raise NotImplementedError(_SCHEMA_ONLY)


def read_paragraph(sentence_id: int | None = None, paragraph_id: int | None = None) -> str:
    """Read a whole paragraph: the one containing a retrieved sentence, or one given by its id.

    Give exactly one of sentence_id or paragraph_id, using an id shown in a search result.

    Args:
        sentence_id: The id of a sentence from a search result; its parent paragraph is read.
        paragraph_id: The id of a paragraph from a search result.

    Returns:
        The paragraph's title and all of its sentences, each with its sentence id.
    """
    raise NotImplementedError(_SCHEMA_ONLY)


def search(query: str) -> str:
    """Search the corpus for the paragraphs most relevant to the query.

    Args:
        query: What to look for, as a short question or keywords.

    Returns:
        The top-K paragraphs, each with its paragraph id, title and full text.
    """
    raise NotImplementedError(_SCHEMA_ONLY)


def answer(answer: str) -> str:
    """Give the final answer to the question. This ends the episode; call it exactly once.

    Args:
        answer: The final answer only, as short as possible: a name, date, number, or yes/no.

    Returns:
        Nothing: the episode ends.
    """
    raise NotImplementedError(_SCHEMA_ONLY)


TOOL_FUNCTIONS: dict[ToolName, Callable[..., str]] = {
    ToolName.SEMANTIC_SEARCH: semantic_search,
    ToolName.KEYWORD_SEARCH: keyword_search,
    ToolName.READ_PARAGRAPH: read_paragraph,
    ToolName.SEARCH: search,
    ToolName.ANSWER: answer,
}
"""The definition of every ToolName; each function's ``__name__`` is the tool's name."""

# Rules a JSON schema from get_json_schema cannot express; the parser enforces them.
_EXACTLY_ONE_OF: dict[ToolName, tuple[str, ...]] = {
    ToolName.READ_PARAGRAPH: ("sentence_id", "paragraph_id"),
}


class ParamSpec(NamedTuple):
    """One argument of a tool: its JSON type (``"string"``, ``"integer"``) and whether required."""

    json_type: str
    required: bool


@dataclass(frozen=True)
class ToolSpec:
    """What the parser checks a call against; derived from the tool's JSON schema."""

    name: ToolName
    parameters: Mapping[str, ParamSpec]
    """Argument name → (JSON type, required), in the function's order. Read-only."""
    exactly_one_of: tuple[str, ...] = ()
    """Optional arguments of which a call must give exactly one (read_paragraph's two ids)."""


def _unwrap(text: str) -> str:
    """Join hard-wrapped docstring lines; keep blank lines between paragraphs."""
    return re.sub(r"(?<!\n)\n(?!\n)", " ", text)


@functools.cache
def _schema(name: ToolName) -> dict:
    function = TOOL_FUNCTIONS[name]
    schema = get_json_schema(function)
    # Docstrings are wrapped to the source's line length; the model should see flowing prose.
    body = schema["function"]
    body["description"] = _unwrap(body["description"])
    for prop in body["parameters"]["properties"].values():
        prop["description"] = _unwrap(prop["description"])
    if "description" in body.get("return", {}):
        body["return"]["description"] = _unwrap(body["return"]["description"])
    # Guards the invariant the chat template and the parser rely on: name == ToolName value.
    if schema["function"]["name"] != name.value:
        raise AssertionError(f"tool function {function.__name__} does not match {name!r}")
    return schema


def tool_schema(name: ToolName) -> dict:
    """The ``{"type": "function", "function": {...}}`` schema of a tool, for ``tools=``.

    Returns a fresh copy, so callers may modify it.
    """
    return copy.deepcopy(_schema(ToolName(name)))


@functools.cache
def _tool_spec(name: ToolName) -> ToolSpec:
    parameters = _schema(name)["function"]["parameters"]
    required = set(parameters.get("required", ()))
    params = {
        arg: ParamSpec(json_type=prop["type"], required=arg in required)
        for arg, prop in parameters["properties"].items()
    }
    return ToolSpec(
        name=name,
        parameters=MappingProxyType(params),
        exactly_one_of=_EXACTLY_ONE_OF.get(name, ()),
    )


def tool_specs(names: Iterable[ToolName | str]) -> dict[str, ToolSpec]:
    """The specs of the given tools, keyed by tool name, in the given order (duplicates once).

    Raises ValueError on a name that is not a ToolName: that is a configuration error.
    """
    specs: dict[str, ToolSpec] = {}
    for name in names:
        tool = ToolName(name)
        specs.setdefault(tool, _tool_spec(tool))
    return specs
