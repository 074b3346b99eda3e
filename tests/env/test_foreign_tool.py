"""A tool grasp does not ship, defined and registered in this file only, is a tool like the others.

``Lookup`` (``lookup(paragraph, phrase)``: the sentences of a paragraph that contain an exact
phrase) records evidence of its own kind, "lookup". Registered for the length of a test
(``grasp.env.tools.registered``), it is offered in the prompt and the schemas, parsed, run
once per turn for every episode that called it, recorded in the episode's evidence mapping,
written to the trajectory file as ``lookup_paragraph_ids`` and read back; no package file
names it. Unregistered afterwards, it is gone, so no other test sees it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import pytest

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.env.episode import Episode
from grasp.env.parser import parse_turn
from grasp.env.tools import TOOLS, Tool, ToolCall, ToolContext, refuse, registered, tool_names
from grasp.reward import compute_reward
from grasp.rollout.scripted import tool_call_text
from grasp.rollout.trajectory import Trajectory
from grasp.types import ParseErrorKind, StopReason


class Lookup(Tool):
    """The sentences of a paragraph that contain a phrase; the paragraph joins "lookup"."""

    name = "lookup"
    evidence = "lookup"
    compact = "lookup(paragraph, phrase): the sentences of a paragraph containing a phrase"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        """The episode ids of each ``run``: one entry per turn that called the tool."""

    @staticmethod
    def lookup(paragraph: int, phrase: str) -> str:
        """Find the sentences of a paragraph that contain an exact phrase.

        Args:
            paragraph: The id of a paragraph from a search result.
            phrase: The exact words to look for, e.g. a name.

        Returns:
            Each sentence of the paragraph that contains the phrase, with its sentence id.
        """
        raise NotImplementedError("schema only")

    def run(
        self, episodes: Sequence[Episode], calls: Sequence[ToolCall], context: ToolContext
    ) -> list[str | None]:
        self.batches.append([episode.episode_id for episode in episodes])
        return [self._look(e, c, context) for e, c in zip(episodes, calls, strict=True)]

    def _look(self, episode: Episode, call: ToolCall, context: ToolContext) -> str:
        corpus = context.index.corpus
        paragraph, phrase = call.arguments["paragraph"], call.arguments["phrase"]
        if not corpus.has_paragraph(paragraph):
            return refuse(episode, f"paragraph p{paragraph} does not exist.", context)
        episode.add_evidence(self.evidence, (paragraph,))
        ids, texts = corpus.sentence_ids(paragraph), corpus.paragraph_sentences(paragraph)
        found = [f"(s{i}) {text}" for i, text in zip(ids, texts, strict=True) if phrase in text]
        return "\n".join([f"lookup p{paragraph} {phrase!r}:", *(found or ["none"])])


TOOLS_WITH_LOOKUP = ["keyword_search", "read_paragraph", "lookup", "answer"]
SHIPPED = ("semantic_search", "keyword_search", "read_paragraph", "search", "answer")


@pytest.fixture
def lookup() -> Iterator[Lookup]:
    with registered(Lookup()) as (tool,):
        yield tool
    assert tool_names() == SHIPPED  # nothing leaks into the next test


def _paragraph(index, title: str) -> int:
    corpus = index.corpus
    return next(p for p in range(corpus.num_paragraphs) if corpus.title(p) == title)


def test_the_tool_is_offered_in_the_schemas_and_the_prompt(tiny_index, lookup):
    env = RetrievalEnvironment(tiny_index, EnvConfig(tools=TOOLS_WITH_LOOKUP, top_k=2))
    assert [s["function"]["name"] for s in env.tool_schemas] == TOOLS_WITH_LOOKUP
    assert env.tool_schemas[2] == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find the sentences of a paragraph that contain an exact phrase.",
            "parameters": {
                "type": "object",
                "properties": {
                    "paragraph": {
                        "type": "integer",
                        "description": "The id of a paragraph from a search result.",
                    },
                    "phrase": {
                        "type": "string",
                        "description": "The exact words to look for, e.g. a name.",
                    },
                },
                "required": ["paragraph", "phrase"],
            },
            "return": {
                "type": "string",
                "description": (
                    "Each sentence of the paragraph that contains the phrase, with its sentence id."
                ),
            },
        },
    }
    listed = RetrievalEnvironment(
        tiny_index, EnvConfig(tools=TOOLS_WITH_LOOKUP, top_k=2, schemas_in_prompt=False)
    )
    tool_lines = [line for line in listed.system_prompt.splitlines() if line.startswith("- ")]
    assert tool_lines == [
        "- keyword_search(query): top sentences by shared words (BM25)",
        "- read_paragraph(sentence_id or paragraph_id): the whole paragraph",
        "- lookup(paragraph, phrase): the sentences of a paragraph containing a phrase",
        "- answer(answer): final short answer; ends the episode",
    ]
    assert EnvConfig().tools == ["semantic_search", "keyword_search", "read_paragraph", "answer"]


def test_the_parser_accepts_its_calls_where_it_is_offered(tiny_index, lookup):
    offered = RetrievalEnvironment(tiny_index, EnvConfig(tools=TOOLS_WITH_LOOKUP, top_k=2))
    text = tool_call_text("lookup", paragraph="4", phrase="Poland")
    assert parse_turn(text, offered.specs).call == ToolCall(
        "lookup", {"paragraph": 4, "phrase": "Poland"}
    )
    missing = parse_turn(tool_call_text("lookup", paragraph=4), offered.specs).error
    assert missing.kind is ParseErrorKind.MISSING_ARGUMENT
    assert missing.message == (
        'Error: lookup is missing the required argument "phrase". '
        'Example: {"name": "lookup", "arguments": {"paragraph": <integer>, "phrase": "..."}}'
    )
    # Registered but not offered: a tool of grasp's, just not this episode's.
    default = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2))
    assert parse_turn(text, default.specs).error.kind is ParseErrorKind.TOOL_NOT_ALLOWED


def test_the_environment_runs_one_batch_per_turn_and_records_its_evidence(
    tiny_index, tiny_questions, lookup
):
    env = RetrievalEnvironment(tiny_index, EnvConfig(tools=TOOLS_WITH_LOOKUP, top_k=2))
    episodes = [env.reset(tiny_questions[0], sample_index=i) for i in range(3)]
    warsaw, curie = _paragraph(tiny_index, "Warsaw"), _paragraph(tiny_index, "Marie Curie")
    texts = [
        tool_call_text("lookup", paragraph=warsaw, phrase="Poland"),
        tool_call_text("keyword_search", query="capital of Poland"),
        tool_call_text("lookup", paragraph=curie, phrase="Nobel"),
    ]
    observations = env.step(episodes, texts)
    assert lookup.batches == [["q-curie#0", "q-curie#2"]]  # one run for both callers
    first = tiny_index.corpus.sentence_ids(warsaw).start
    assert observations[0] == (
        f"lookup p{warsaw} 'Poland':\n"
        f"(s{first}) Warsaw is the capital and largest city of Poland.\n"
        f"(s{first + 1}) The city stands on the Vistula River in east-central Poland.\n"
        "[5 turns left]"
    )
    nobel = tiny_index.corpus.sentence_ids(curie).start + 2
    assert observations[2] == (
        f"lookup p{curie} 'Nobel':\n(s{nobel}) She was the first woman to win a Nobel Prize.\n"
        "[5 turns left]"
    )
    assert episodes[0].evidence_ids == {
        "semantic": set(),
        "keyword": set(),
        "read": set(),
        "lookup": {warsaw},
    }
    assert episodes[0].turns[0].call == {
        "name": "lookup",
        "arguments": {"paragraph": warsaw, "phrase": "Poland"},
    }
    assert dict(episodes[0].tool_calls) == {"lookup": 1}
    # A search records only its own kind: the lookup kind appears where a lookup ran.
    assert "lookup" not in episodes[1].evidence_ids and episodes[1].keyword_paragraph_ids
    assert episodes[0].evidence().paragraph_ids("lookup") == frozenset({warsaw})


def test_its_evidence_is_written_to_the_trajectory_file_and_read_back(
    tiny_index, tiny_questions, lookup
):
    env = RetrievalEnvironment(tiny_index, EnvConfig(tools=TOOLS_WITH_LOOKUP, top_k=2))
    episode = env.reset(tiny_questions[0])
    warsaw = _paragraph(tiny_index, "Warsaw")
    env.step([episode], [tool_call_text("lookup", paragraph=warsaw, phrase="Poland")])
    env.step([episode], [tool_call_text("answer", answer="Warsaw")])
    assert episode.stop_reason is StopReason.ANSWERED
    trajectory = Trajectory.from_episode(episode, compute_reward(episode.evidence()), None)
    data = trajectory.to_json()
    keys = list(data)
    start = keys.index("turn_budget")
    assert keys[start : start + 6] == [
        "turn_budget",
        "semantic_paragraph_ids",
        "keyword_paragraph_ids",
        "read_paragraph_ids",
        "lookup_paragraph_ids",
        "tool_calls",
    ]
    assert (data["lookup_paragraph_ids"], data["read_paragraph_ids"]) == ([warsaw], [])
    line = json.dumps(data)
    read_back = Trajectory.from_json(json.loads(line))
    assert read_back == trajectory
    assert read_back.evidence_ids == {"semantic": [], "keyword": [], "read": [], "lookup": [warsaw]}
    assert read_back.retrieved_paragraph_ids == {warsaw}
    assert json.dumps(read_back.to_json()) == line


def test_a_record_without_the_kind_reads_back_without_it(tiny_index, tiny_questions, lookup):
    """Files written before a tool existed (every committed one) have no key for its kind."""
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2))
    episode = env.reset(tiny_questions[0])
    env.step([episode], [tool_call_text("answer", answer="Warsaw")])
    data = Trajectory.from_episode(episode, compute_reward(episode.evidence()), None).to_json()
    assert [k for k in data if k.endswith("_paragraph_ids")] == [
        "gold_paragraph_ids",
        "semantic_paragraph_ids",
        "keyword_paragraph_ids",
        "read_paragraph_ids",
    ]
    assert set(Trajectory.from_json(data).evidence_ids) == {"semantic", "keyword", "read"}


def test_unregistered_the_tool_is_gone(tiny_index):
    with registered(Lookup()):
        assert EnvConfig(tools=TOOLS_WITH_LOOKUP).tools == TOOLS_WITH_LOOKUP
    assert "lookup" not in TOOLS
    with pytest.raises(ValueError, match="env.tools='lookup' is not one of"):
        EnvConfig(tools=TOOLS_WITH_LOOKUP)
    text = tool_call_text("lookup", paragraph=4, phrase="Poland")
    default = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2))
    assert parse_turn(text, default.specs).error.kind is ParseErrorKind.UNKNOWN_TOOL
