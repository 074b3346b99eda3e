"""Where a tool is defined: one class per tool, and the registry that says which tools exist.

- ``registry``: what a tool is (``Tool``: name, signature, batched ``run``, observation, role,
  evidence kind) and ``TOOLS``, the one table of registered tools, with ``register_tool``,
  ``registered`` (for a block, e.g. a test) and the queries the rest of grasp uses.
- ``search``: ``semantic_search`` (D_s), ``keyword_search`` (D_k), ``search`` (Search-R1).
- ``read_paragraph``: ``read_paragraph`` (D_r).
- ``answer``: ``answer``, which ends the episode.

Importing this package registers those five, in this order (the order of every derived
list: the default tool set, the parser's messages, the metrics). ``RetrievalEnvironment``
parses each turn, groups the valid calls by tool and dispatches each group to its tool's
``run``::

    observations = TOOLS["keyword_search"].run(episodes, calls, context)

A new tool is one ``Tool`` subclass anywhere and one ``register_tool`` call; its name is then
valid in ``env.tools``, its schema is offered, the parser accepts its calls, and what it
records under its evidence kind reaches ``Episode.evidence_ids`` and the trajectory file.
"""

from __future__ import annotations

from grasp.env.tools.answer import Answer, citation_id, resolve_citations
from grasp.env.tools.read_paragraph import ReadParagraph, format_paragraph
from grasp.env.tools.registry import (
    SCHEMA_ONLY,
    TOOLS,
    Tool,
    ToolCall,
    ToolContext,
    ToolRole,
    default_tool_names,
    get_tool,
    has_role,
    refuse,
    register_tool,
    registered,
    tool_names,
    tools_with,
    unregister_tool,
)
from grasp.env.tools.search import KeywordSearch, Search, SearchTool, SemanticSearch, format_hits

for _shipped in (SemanticSearch(), KeywordSearch(), ReadParagraph(), Search(), Answer()):
    register_tool(_shipped)

__all__ = [
    "SCHEMA_ONLY",
    "TOOLS",
    "Answer",
    "KeywordSearch",
    "ReadParagraph",
    "Search",
    "SearchTool",
    "SemanticSearch",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolRole",
    "citation_id",
    "default_tool_names",
    "format_hits",
    "format_paragraph",
    "get_tool",
    "has_role",
    "refuse",
    "register_tool",
    "registered",
    "resolve_citations",
    "tool_names",
    "tools_with",
    "unregister_tool",
]
