"""A short worked episode shown before the question: a scaffold for tiny models.

Invented, not from any dataset. It is written with the tools' own observation text
(``grasp.env.tools``), so that it shows exactly what an episode of the same tools shows; which
tools it calls is read from the registry (the offered searches, in the order registered, the
read tool when offered, the answer tool).

    messages += demonstration(config.tools, config.turn_budget)
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from grasp.env.observations import turns_left_line, user_prompt
from grasp.env.tools import (
    TOOLS,
    ReadParagraph,
    SearchTool,
    ToolRole,
    format_hits,
    format_paragraph,
    tools_with,
)
from grasp.types import Hit


def _call(name: str, **arguments: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


_DEMO_QUESTION = "Where was the director of Jaws born?"
_DEMO_HOPS = (
    # query, paragraph id, title, first sentence id, sentences, index of the hit sentence
    (_DEMO_QUESTION, 3, "Jaws (film)", 10,
     ("Jaws is a 1975 American thriller film.", "It was directed by Steven Spielberg."), 1),
    ("Steven Spielberg born", 9, "Steven Spielberg", 41,
     ("Steven Spielberg is an American filmmaker.", "Spielberg was born in Cincinnati, Ohio."), 1),
)  # fmt: skip
_DEMO_ANSWER = "Cincinnati"


def demonstration(tools: Sequence[str], turn_budget: int) -> list[dict[str, str]]:
    """A short worked episode (invented, not from any dataset) shown before the question.

    It uses only the episode's tools: one search per hop (alternating between the search
    tools available), then, when ``read_paragraph`` is a tool, a read of the hit sentence's
    paragraph, then the answer. Hits are sentences or whole paragraphs, as in the episode.
    """
    # The demonstration writes these tools' own call arguments and observations, so it can
    # show only the shipped kinds of search, read and answer; another tool goes unshown.
    searches = [
        TOOLS[name]
        for name in tools_with(ToolRole.SEARCH)
        if name in tools and isinstance(TOOLS[name], SearchTool)
    ]
    if not searches:
        raise ValueError(f"a demonstration needs a search tool, got {list(tools)}")
    reads = any(isinstance(TOOLS[name], ReadParagraph) for name in tools)
    answer = next((name for name in tools_with(ToolRole.ANSWER) if name in tools), None)
    if answer is None:
        raise ValueError(f"a demonstration needs an answer tool, got {list(tools)}")
    budget = max(turn_budget, len(_DEMO_HOPS) + int(reads) + 1)
    messages = [{"role": "user", "content": user_prompt(_DEMO_QUESTION, budget)}]

    def step(call: str, observation: str) -> None:
        used = (len(messages) + 1) // 2
        left = turns_left_line(budget - used)
        messages.append({"role": "assistant", "content": call})
        messages.append({"role": "tool", "content": f"{observation}\n{left}"})

    for hop, (query, paragraph_id, title, first_id, sentences, hit) in enumerate(_DEMO_HOPS):
        tool = searches[hop % len(searches)]
        result = Hit(
            paragraph_id=paragraph_id,
            sentence_id=first_id + hit if reads else None,
            title=title,
            text=sentences[hit] if reads else " ".join(sentences),
            score=1.0,
            retriever=tool.retriever,
            rank=0,
        )
        observation = format_hits(tool.name, query, [result], max_chars=400)
        step(_call(tool.name, query=query), observation)
    if reads:
        _, paragraph_id, title, first_id, sentences, hit = _DEMO_HOPS[-1]
        paragraph = format_paragraph(paragraph_id, title, sentences, first_id, max_chars=400)
        step(_call(ReadParagraph.name, sentence_id=first_id + hit), paragraph)
    messages.append({"role": "assistant", "content": _call(answer, answer=_DEMO_ANSWER)})
    return messages
