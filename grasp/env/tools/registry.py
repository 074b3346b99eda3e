"""The tool registry: what a tool is, and the one table of the tools that exist.

A tool is one ``Tool`` object that holds everything about it: its **name**, its **signature**
(a schema-only function named after the tool, whose type hints and Google-style docstring
*are* its definition, the TRL/transformers convention that ``grasp.env.tool_specs`` turns
into the JSON schema and the parser's spec), its **batched execution** (``run`` takes every
call of one turn that chose it), the **observation** text it returns, its **role** (what the
environment, the prompts and the scripted policies may rely on it for) and the **kind of
evidence** its results add to the episode (``evidence``; ``Episode.evidence_ids``).

``TOOLS`` is the only list of the tools that exist: configuration (``env.tools``), schemas,
the parser, the prompts and the metrics all read it. Registering a tool is one call, from
any module; nothing else needs editing::

    register_tool(Lookup())            # for good
    with registered(Lookup()):         # for a block (a test), unregistered afterwards
        env = RetrievalEnvironment(index, EnvConfig(tools=[..., "lookup", "answer"]))

The tools grasp ships are registered by ``grasp.env.tools`` (the package), so importing
anything from it, this module included, registers them first.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

from grasp.env.episode import INVALID_CALL, Episode, ToolCall
from grasp.env.observations import format_error
from grasp.types import Granularity, StrEnum

if TYPE_CHECKING:
    from grasp.corpus.index import SearchIndex

SCHEMA_ONLY = "schema only: the tool object's run implements this tool"


class ToolRole(StrEnum):
    """What a tool is to the rest of grasp, beyond its own run."""

    SEARCH = "search"
    """Queries the index; an episode needs one (``env.tools``)."""
    READ = "read"
    """Reads a hit's whole paragraph: offering one makes hits sentences, not paragraphs."""
    ANSWER = "answer"
    """Gives the final answer and ends the episode; an episode needs one."""
    OTHER = "other"
    """Anything else (a registered tool of a test, say)."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool reads from the environment: the index and the episode's rules."""

    index: SearchIndex
    top_k: int
    """Hits per search (the paper's K)."""
    granularity: Granularity
    """Sentence hits when a read tool is offered, whole paragraphs otherwise."""
    question_scoped: bool
    """Search only each question's own paragraphs (``Episode.scope``)."""
    read_requires_retrieved: bool
    """read_paragraph accepts only ids shown earlier in the episode."""
    max_observation_chars: int
    """Each hit or paragraph text is cut to this many characters."""
    citations: bool = False
    """answer takes the sentence ids it rests on (``env.citations``)."""
    handles: bool = False
    """Hits are labelled ``[n]``, numbered per episode, and read_paragraph takes that number
    (``env.hit_labels=handles``); else hits show their sentence and paragraph ids."""


class Tool(abc.ABC):
    """One tool: its signature, its batched execution, its observations and its evidence."""

    name: ClassVar[str]
    """What the policy calls it; the class must have a static method of this name, its
    signature."""
    compact: ClassVar[str]
    """One line standing in for the JSON schema when ``env.schemas_in_prompt`` is false."""
    role: ClassVar[ToolRole] = ToolRole.OTHER
    evidence: ClassVar[str | None] = None
    """The evidence kind its results join (``Episode.add_evidence``); None: it records none."""
    default: ClassVar[bool] = False
    """Offered by default (``EnvConfig.tools``): GRASP's own tool set, which plans draw on."""
    exactly_one_of: ClassVar[tuple[str, ...]] = ()
    """Optional arguments of which a call must give exactly one (a rule the JSON schema cannot
    express; the parser enforces it)."""
    paragraph_description: ClassVar[str | None] = None
    """The description to show instead of the docstring's when hits are whole paragraphs."""

    @property
    def signature(self) -> Callable[..., str]:
        """The schema-only function named after the tool: its hints and docstring are the schema."""
        return getattr(type(self), str(self.name))

    def signature_for(self, citations: bool, handles: bool = False) -> Callable[..., str]:
        """The signature an episode shows: answer's citing one when ``env.citations`` is on,
        read_paragraph's by-hit one when ``env.hit_labels=handles``."""
        return self.signature

    def exactly_one_of_for(self, handles: bool) -> tuple[str, ...]:
        """``exactly_one_of`` of the signature ``signature_for`` gives."""
        return self.exactly_one_of

    def compact_for(self, citations: bool, handles: bool = False) -> str:
        """``compact`` of the signature ``signature_for`` gives."""
        return self.compact

    @abc.abstractmethod
    def run(
        self, episodes: Sequence[Episode], calls: Sequence[ToolCall], context: ToolContext
    ) -> list[str | None]:
        """Execute one turn's calls of this tool, ``calls[i]`` made by ``episodes[i]``.

        The call is already recorded on each episode's current turn. Returns each episode's
        observation, or None for an episode that the call ended.
        """


def refuse(episode: Episode, problem: str, context: ToolContext) -> str:
    """Mark the current turn a refused call and explain why, as its observation."""
    episode.record_error(INVALID_CALL)
    return format_error(
        f"{problem} Read a sentence or paragraph id from a search result.",
        context.max_observation_chars,
    )


# ------------------------------------------------------------------ the registry

_REGISTRY: dict[str, Tool] = {}
TOOLS: Mapping[str, Tool] = MappingProxyType(_REGISTRY)
"""Every registered tool by name, in the order registered: a live, read-only view."""

_NAME = re.compile(r"[a-z][a-z0-9_]*")
RESERVED_EVIDENCE = frozenset({"gold"})
"""Kinds no tool may record: a trajectory writes ``gold_paragraph_ids`` beside its evidence."""


def register_tool(tool: Tool) -> Tool:
    """Add ``tool`` to ``TOOLS`` and return it.

    Raises ValueError when its name is taken or is not a lowercase identifier, when its class
    has no signature of that name, or when its evidence kind is not a lowercase identifier.
    """
    name = str(tool.name)
    if not _NAME.fullmatch(name):
        raise ValueError(f"tool name {name!r} must be a lowercase identifier")
    if name in _REGISTRY:
        raise ValueError(f"a tool named {name!r} is already registered")
    signature = getattr(type(tool), name, None)
    if not callable(signature) or signature.__name__ != name:
        raise ValueError(f"{type(tool).__name__} needs a signature method named {name!r}")
    kind = tool.evidence
    if kind is not None and (not _NAME.fullmatch(kind) or kind in RESERVED_EVIDENCE):
        raise ValueError(f"{name}: evidence kind {kind!r} must be a lowercase identifier")
    _REGISTRY[name] = tool
    return tool


def unregister_tool(name: str) -> Tool:
    """Remove the tool ``name`` from ``TOOLS`` and return it (KeyError when absent)."""
    return _REGISTRY.pop(str(name))


@contextmanager
def registered(*tools: Tool) -> Iterator[tuple[Tool, ...]]:
    """Register ``tools`` for the block, and unregister them after it, whatever happens."""
    added: list[Tool] = []
    try:
        for tool in tools:
            added.append(register_tool(tool))
        yield tools
    finally:
        for tool in reversed(added):
            unregister_tool(tool.name)


def get_tool(name: str, field_name: str = "tool") -> Tool:
    """The registered tool ``name``; a ValueError naming ``field_name`` and the registered
    names when there is none (a configuration error)."""
    tool = _REGISTRY.get(str(name))
    if tool is None:
        raise ValueError(f"{field_name}={name!r} is not one of: {', '.join(_REGISTRY)}")
    return tool


# The registry is keyed by plain strings, and the queries below give them (never a shipped
# tool's ToolName): names end up in configs, messages and metric keys, where a name is its text.


def tool_names() -> tuple[str, ...]:
    """The name of every registered tool, in the order registered."""
    return tuple(_REGISTRY)


def tools_with(role: ToolRole) -> tuple[str, ...]:
    """The names of the registered tools of ``role``, in the order registered."""
    return tuple(name for name, tool in _REGISTRY.items() if tool.role is role)


def default_tool_names() -> list[str]:
    """The tools an episode offers unless configured otherwise (``Tool.default``)."""
    return [name for name, tool in _REGISTRY.items() if tool.default]


def has_role(name: str, role: ToolRole) -> bool:
    """Whether ``name`` is a registered tool of ``role`` (False for an unknown name, e.g. one
    recorded in a trajectory by a tool not registered now)."""
    tool = _REGISTRY.get(str(name))
    return tool is not None and tool.role is role
