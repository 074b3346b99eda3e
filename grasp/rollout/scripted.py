"""Policies without a language model: scripted turns for tests, and a heuristic search agent.

``ScriptedPolicy`` replays given texts (tests use it to drive the environment exactly).
``HeuristicSearchPolicy`` is a baseline that needs no LLM: both searches on the question,
read the top paragraphs, search again with the question plus what was read, then answer
with a title. Its recall tells how much the environment lets a policy find in T turns.
Given a ``plan`` (a list of tool names), it calls exactly those tools in that order instead;
the warm start uses plans to show a policy several ways of acting (grasp/train/warm_start.py).
A plan names tools of the default tool set (``plan_tools``, read from the tool registry): its
searches, its read tool and its answer tool. A plan's search is the question verbatim; ``semantic_search:bridge`` or
``keyword_search:bridge`` reformulates it for the next hop: the title of the paragraph read
last (else of the top hit) and the question's content words that title does not name;
``semantic_search:entity`` or ``keyword_search:entity`` queries the bridge entity instead: the
first name the paragraph read last mentions that neither the question nor its title holds,
with the question's content words (``entity_query``; on the training questions it found a
gold paragraph the question's own searches missed 5 times as often as ``:bridge``,
results/cpu_grasp_v2/bridge_probe.json).

Demonstrations may choose with the gold paragraphs' titles (``gold_titles``, by question id;
the policy learning from them sees none): ``read_paragraph:gold`` reads the first unread hit
of a gold paragraph (else the first unread hit), and a step written ``?step`` runs only while
a gold paragraph is still missing from the hits (a hop only where one is needed).
When the system prompt asks for citations (``env.citations``), its answer cites the sentence
hits of the paragraphs it read (the top sentence hit when it read none).
Both act only on what a model would see: the messages of the conversation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence

from grasp.env.observations import CITATIONS_HINT, HANDLE_SEPARATOR, HIT_TITLE, unquote
from grasp.env.tools import TOOLS, ToolRole, default_tool_names
from grasp.rollout.policy import Generation, GenerationRequest, SamplingConfig
from grasp.types import ToolName

_HIT = re.compile(rf"^\d+\. \[(?:s(\d+) )?p(\d+) {HIT_TITLE}\]", re.MULTILINE)
_HANDLE_HIT = re.compile(rf"^\[(\d+)\] (.*?){re.escape(HANDLE_SEPARATOR)}", re.MULTILINE)
_HANDLE_READ = re.compile(r"^read_paragraph \[\d+\] (.*):$", re.MULTILINE)
_TURNS_LEFT = re.compile(r"\[(\d+) turns? left\]")
_READ = re.compile(r"^read_paragraph p(\d+) ", re.MULTILINE)
_YES_NO_START = ("is ", "are ", "was ", "were ", "do ", "does ", "did ", "can ", "could ", "has ")


def tool_call_text(name: str, reasoning: str = "", **arguments: object) -> str:
    """The text of one Qwen-style tool call, as a model would write it."""
    payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    prefix = f"{reasoning}\n" if reasoning else ""
    return f"{prefix}<tool_call>\n{payload}\n</tool_call>"


class ScriptedPolicy:
    """Replays scripted turns: ``script(request)`` returns the text of the next turn."""

    def __init__(self, script: Callable[[GenerationRequest], str]) -> None:
        self.script = script

    @classmethod
    def from_turns(cls, turns: Mapping[str, Sequence[str]]) -> ScriptedPolicy:
        """Turn ``n`` of episode ``request_id`` is ``turns[request_id][n]``."""

        def script(request: GenerationRequest) -> str:
            done = sum(1 for m in request.messages if m["role"] == "assistant")
            return turns[request.request_id][done]

        return cls(script)

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        return [Generation(text=self.script(request)) for request in requests]


BRIDGE = ":bridge"
"""A plan search with this suffix queries the next hop instead of the question."""
ENTITY = ":entity"
"""A plan search with this suffix queries the bridge entity (``entity_query``)."""
GOLD = ":gold"
"""A plan read with this suffix reads a hit of a gold paragraph (``gold_titles``)."""
IF_MISSING = "?"
"""A plan step with this prefix runs only while a gold paragraph is missing from the hits."""
_SUFFIXES = (BRIDGE, ENTITY, GOLD)
_STOPWORDS = frozenset(
    "a an the of in on at to for by with from and or is are was were be been who whom whose "
    "what which when where why how did does do that this than as it its his her their".split()
)


def plan_tools(role: ToolRole | None = None) -> tuple[str, ...]:
    """The tools a plan can name (the default tool set, ``Tool.default``), or those of
    ``role``: semantic_search, keyword_search, read_paragraph, answer."""
    names = default_tool_names()
    return tuple(name for name in names if role is None or TOOLS[name].role is role)


def plan_tool(step: str) -> str:
    """The tool a plan step calls (``?semantic_search:entity`` calls semantic_search)."""
    step = step.removeprefix(IF_MISSING)
    for suffix in _SUFFIXES:
        step = step.removesuffix(suffix)
    return step


def needs_gold(plan: Sequence[str]) -> bool:
    """Whether the plan chooses with the gold titles (``:gold`` reads, ``?`` steps)."""
    return any(step.startswith(IF_MISSING) or step.endswith(GOLD) for step in plan)


def check_plan(plan: Sequence[str], field: str = "plan") -> None:
    """A plan names known tools and ends with ``answer`` (its only ``answer``); a search may
    be ``:bridge`` or ``:entity``, a read ``:gold``, and any step but the answer ``?``."""
    known, searches = plan_tools(), plan_tools(ToolRole.SEARCH)
    reads = plan_tools(ToolRole.READ)

    def valid(step: str) -> bool:
        tool, bare = plan_tool(step), step.removeprefix(IF_MISSING)
        if tool not in known:
            return False
        if bare.endswith((BRIDGE, ENTITY)):
            return tool in searches
        return tool in reads if bare.endswith(GOLD) else bare == tool

    unknown = [step for step in plan if not valid(step)]
    if unknown:
        raise ValueError(
            f"{field}: unknown tool(s) {unknown}; a plan uses {list(known)}, a search "
            f"optionally as <search>{BRIDGE} or <search>{ENTITY}, a read as <read>{GOLD}, "
            f"a step before the answer optionally as {IF_MISSING}<step>"
        )
    answers = plan_tools(ToolRole.ANSWER)
    if not plan or plan[-1] not in answers or any(plan_tool(step) in answers for step in plan[:-1]):
        raise ValueError(f"{field}: {list(plan)} must end with 'answer' and answer only there")


class HeuristicSearchPolicy:
    """A fixed search-then-read plan over the conversation; no model involved."""

    def __init__(
        self,
        reads: int = 2,
        assistant_prefix: str = "",
        plan: Sequence[str] | None = None,
        gold_titles: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.reads = reads
        """How many top paragraphs to read after the two first searches (without a plan)."""
        self.assistant_prefix = assistant_prefix
        """The rollout's assistant prefix (inserted before each turn): turns continue it."""
        if plan is not None:
            check_plan(plan)
            if needs_gold(plan) and gold_titles is None:
                raise ValueError(f"plan {list(plan)} chooses with gold titles: give gold_titles")
        self.plan = list(plan) if plan is not None else None
        """The tools to call, in order (searches query the question; a read takes the first
        unread hit); ``None``: the heuristic above."""
        self.gold_titles = gold_titles or {}
        """Question id -> the titles of its gold paragraphs (demonstrations only)."""

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        return [
            Generation(text=self._continue(request.messages, self._gold(request)))
            for request in requests
        ]

    def _gold(self, request: GenerationRequest) -> frozenset[str]:
        question_id = (request.request_id or "").rsplit("#", 1)[0]
        return self.gold_titles.get(question_id, frozenset())

    def _continue(self, messages: Sequence[Mapping[str, str]], gold: frozenset[str]) -> str:
        text = self.next_turn(messages, gold)
        if not text.startswith(self.assistant_prefix):
            raise ValueError(f"turn {text!r} does not continue {self.assistant_prefix!r}")
        return text[len(self.assistant_prefix) :]

    def next_turn(
        self, messages: Sequence[Mapping[str, str]], gold: frozenset[str] = frozenset()
    ) -> str:
        """The full text of the next turn, given the conversation (a demonstration before the
        question is skipped: the episode starts at the last user message) and, for a plan that
        chooses with them, the gold paragraphs' titles."""
        start = max(i for i, m in enumerate(messages) if m["role"] == "user")
        cite = any(m["role"] == "system" and CITATIONS_HINT in m["content"] for m in messages)
        question = _question(messages[start:])
        messages = messages[start:]
        tool_texts = [m["content"] for m in messages if m["role"] == "tool"]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        turns_left = _turns_left(tool_texts)
        hits = [hit for text in tool_texts for hit in _hits(text)]
        read = {title for text in tool_texts for title in _read_titles(text)}
        cited = _citations(hits, tool_texts) if cite else None
        if self.plan is not None:
            step = _plan_step(self.plan, turn, tool_texts, gold)
            return self._planned(step, question, hits, read, cited, tool_texts, gold)
        if turns_left == 1 or turn >= 3 + self.reads:
            return _answer(question, hits, cited)
        if turn == 0:
            return tool_call_text(ToolName.SEMANTIC_SEARCH, query=question)
        if turn == 1:
            return tool_call_text(ToolName.KEYWORD_SEARCH, query=question)
        unread = [h for h in hits if h[2] not in read]
        if turn < 2 + self.reads and unread:
            return _read_call(unread[0])
        bridge = " ".join(sorted(read)) or (hits[0][2] if hits else "")
        return tool_call_text(ToolName.SEMANTIC_SEARCH, query=f"{question} {bridge}".strip())

    @staticmethod
    def _planned(
        step: str,
        question: str,
        hits: Sequence[tuple[str, str, str]],
        read: set[str],
        cited: list[int] | None,
        tool_texts: Sequence[str] = (),
        gold: frozenset[str] = frozenset(),
    ) -> str:
        """The plan's call ``step``; a read with nothing left unread answers instead."""
        tool, bare = plan_tool(step), step.removeprefix(IF_MISSING)
        if bare in plan_tools(ToolRole.SEARCH):
            return tool_call_text(tool, query=question)
        if bare.endswith(BRIDGE):
            return tool_call_text(tool, query=bridge_query(question, hits, read))
        if bare.endswith(ENTITY):
            title, text = _last_read(tool_texts)
            if not title:  # nothing read yet: the top hit's title stands for the paragraph
                title = hits[0][2] if hits else ""
            return tool_call_text(tool, query=entity_query(question, title, text))
        unread = [h for h in hits if h[2] not in read]
        if bare.endswith(GOLD):
            unread = [h for h in unread if h[2] in gold] + [h for h in unread if h[2] not in gold]
        if tool in plan_tools(ToolRole.READ) and unread:
            return _read_call(unread[0])
        return _answer(question, hits, cited)


def _plan_step(
    plan: Sequence[str], turn: int, tool_texts: Sequence[str], gold: frozenset[str]
) -> str:
    """The step of ``plan`` that turn ``turn`` plays: the plan walked from its start, a ``?``
    step skipped where every gold title was already among the hits of the turns before it;
    past the plan's end, its last step (the answer)."""
    played = 0
    for step in plan:
        if step.startswith(IF_MISSING):
            shown = {hit[2] for text in tool_texts[:played] for hit in _hits(text)}
            if gold <= shown:
                continue
        if played == turn:
            return step
        played += 1
    return plan[-1]


def _last_read(tool_texts: Sequence[str]) -> tuple[str, str]:
    """The title and text of the paragraph read last ("" and "" when none was)."""
    for text in reversed(tool_texts):
        titles = _read_titles(text)
        if titles:
            return titles[0], text.split("\n", 1)[1] if "\n" in text else ""
    return "", ""


_NAME = re.compile(r"[A-Z][\w'-]*(?:\s+(?:(?:of|the|de|du|la|van|von|der)\s+)*[A-Z][\w'-]*)*")
_LEADING = frozenset(
    "The A An He She It They His Her Its Their In On At This That These After Before During "
    "When While From With By For As".split()
)
_NOT_NAMES = frozenset(
    "January February March April May June July August September October November December "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
)


def named_entities(text: str, exclude: str = "", same_as: str = "") -> list[str]:
    """The capitalised names ``text`` mentions, in order, once each: runs of capitalised words
    (joined by of, the, de, van, von...), without a leading function word ("The Order" is
    "Order"), no month or weekday, none whose words all occur in ``exclude`` (the question and
    a title), and none holding every word of ``same_as`` ("Sir Edmund Hillary" names the
    paragraph "Edmund Hillary" again)."""
    known = set(re.findall(r"\w+", exclude.lower()))
    itself = set(re.findall(r"\w+", re.sub(r"\(.*?\)", "", same_as).lower()))
    names: list[str] = []
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        while words and words[0] in _LEADING:
            words = words[1:]
        if len(words) == 1 and words[0] in _NOT_NAMES:
            continue
        name = " ".join(words)
        words_of_name = set(re.findall(r"\w+", name.lower()))
        if not name or words_of_name <= known or name in names:
            continue
        if itself and itself <= words_of_name:
            continue
        names.append(name)
    return names


def bridge_entity(question: str, title: str, text: str) -> str:
    """The first name paragraph ``title`` (its ``text``) mentions that neither the question
    nor the title holds: the bridge to a two-hop question's second paragraph (else the
    title itself)."""
    names = named_entities(text, exclude=f"{question} {title}", same_as=title)
    return names[0] if names else title


def entity_query(question: str, title: str, text: str) -> str:
    """The next hop's query from a paragraph read: its bridge entity and the question's content
    words that neither the entity nor the title names, at most 12 words in all."""
    entity = bridge_entity(question, title, text)
    words = content_words(question, named=f"{title} {entity}")
    return " ".join([entity, *words][:12]).strip() or question


def bridge_query(question: str, hits: Sequence[tuple[str, str, str]], read: set[str]) -> str:
    """The next hop's query: the title of the last hit whose paragraph was read (else of the
    top hit) and the question's content words that the title does not contain, at most 12
    words in all."""
    read_titles = [h[2] for h in hits if h[2] in read]
    title = read_titles[-1] if read_titles else (hits[0][2] if hits else "")
    return " ".join([title, *content_words(question, named=title)][:12]).strip() or question


def content_words(text: str, named: str = "") -> list[str]:
    """The words of ``text`` that are neither stopwords nor words of ``named``, in order."""
    known = set(re.findall(r"\w+", named.lower()))
    return [
        w
        for w in re.findall(r"\w+", text)
        if w.lower() not in _STOPWORDS and w.lower() not in known
    ]


def _hits(text: str) -> list[tuple[str, str, str]]:
    """(sentence id, paragraph id, title) of each hit line of an observation; a hit labelled
    by handle is ("h<handle>", "", title)."""
    labelled = [(s, p, unquote(t)) for s, p, t in _HIT.findall(text)]
    return labelled or [(f"h{n}", "", unquote(t)) for n, t in _HANDLE_HIT.findall(text)]


def _read_call(hit: tuple[str, str, str]) -> str:
    """read_paragraph of one hit: by its handle, its sentence id or its paragraph id."""
    sentence_id, paragraph_id, _ = hit
    if sentence_id.startswith("h"):
        return tool_call_text(ToolName.READ_PARAGRAPH, hit=int(sentence_id[1:]))
    if sentence_id:
        return tool_call_text(ToolName.READ_PARAGRAPH, sentence_id=int(sentence_id))
    return tool_call_text(ToolName.READ_PARAGRAPH, paragraph_id=int(paragraph_id))


def _answer(question: str, hits: Sequence[tuple[str, str, str]], cited: list[int] | None) -> str:
    """The answer call: the guess, with its citations when the episode asks for them."""
    if cited is None:
        return tool_call_text(ToolName.ANSWER, answer=_guess(question, hits))
    return tool_call_text(ToolName.ANSWER, answer=_guess(question, hits), citations=cited)


def _citations(hits: Sequence[tuple[str, str, str]], tool_texts: Sequence[str]) -> list[int]:
    """The sentence hits of the paragraphs read, in the order shown, each once; the first
    sentence hit when no read paragraph has one (empty without sentence hits)."""
    read = {int(p) for text in tool_texts for p in _READ.findall(text)}
    sentences = [(int(s), int(p)) for s, p, _ in hits if s]
    cited = list(dict.fromkeys(s for s, p in sentences if p in read))
    return cited or [s for s, _ in sentences[:1]]


def _question(messages: Sequence[Mapping[str, str]]) -> str:
    user = next((m["content"] for m in messages if m["role"] == "user"), "")
    first_line = user.splitlines()[0] if user else ""
    return first_line.removeprefix("Question: ").strip()


def _turns_left(tool_texts: Sequence[str]) -> int | None:
    if not tool_texts:
        return None
    found = _TURNS_LEFT.findall(tool_texts[-1])
    return int(found[-1]) if found else None


def _read_titles(text: str) -> list[str]:
    match = re.match(rf"read_paragraph p\d+ {HIT_TITLE}:", text)
    if match:
        return [unquote(match.group(1))]
    by_handle = _HANDLE_READ.match(text)
    return [unquote(by_handle.group(1))] if by_handle else []


def _guess(question: str, hits: Sequence[tuple[str, str, str]]) -> str:
    """Yes for a yes/no question; else the first hit title the question does not mention."""
    if question.lower().startswith(_YES_NO_START):
        return "yes"
    lowered = question.lower()
    for _, _, title in hits:
        name = re.sub(r"\s*\(.*?\)$", "", title)
        if name and name.lower() not in lowered:
            return name
    return hits[0][2] if hits else "unknown"
