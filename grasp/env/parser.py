"""The one place where a policy's generated text becomes a tool call.

The policy speaks Qwen2.5 function calling: free reasoning text, then one block

    <tool_call>
    {"name": "semantic_search", "arguments": {"query": "..."}}
    </tool_call>

``parse_turn`` turns one turn of generated text into a ``ParsedTurn``: the reasoning before the
call, and either a validated ``ToolCall`` or a typed ``ParseError``. It never raises on any
string: a malformed call becomes a ``ParseError`` whose message is written for the model and
becomes its next observation. What the message echoes of the model's text (a tool name, an
argument, a bad value) is quoted as observations quote it (``grasp.env.observations``):
``"`` and ``\\`` escaped, control and bidirectional characters as ``\\xNN`` / ``\\uNNNN``.

Tolerated, because they are harmless: whitespace and newlines around the JSON inside the
tags; a Markdown code fence around it; ``"parameters"`` instead of ``"arguments"``;
arguments given as a JSON-encoded string; an OpenAI-style ``{"function": {...}}`` wrapper; a
one-element JSON list; ``null`` for an optional argument (treated as absent); text after
``</tool_call>`` (ignored: the environment's observation follows the call). The call ends at
the first ``</tool_call>`` outside a JSON string: one inside a string is part of it.

Argument normalization (the returned ``ToolCall.arguments`` holds only given, non-null
arguments, already coerced):

- string arguments: a JSON string, or a finite JSON number (``{"answer": 1984}`` → ``"1984"``,
  so a numeric answer is not lost); surrounding whitespace is stripped; half of an escaped
  UTF-16 pair (``"\\ud83d"`` alone: text no encoder takes and no UTF-8 file holds) becomes
  U+FFFD, for every tool; empty is invalid;
  ``query`` arguments longer than ``max_query_chars`` are invalid. Booleans, lists, objects
  are invalid (no guessing ``true`` → ``"yes"``).
- integer arguments: a JSON integer, an integral float (``12.0``), or a string of decimal
  digits (``"12"``, as small models often quote ids); negative is invalid. Booleans,
  fractional numbers and other strings are invalid.
- array arguments (answer's ``citations``, offered with ``env.citations`` only): passed
  through as given. The answer tool judges each citation (``grasp.env.tools.Answer``), so
  that a bad citation is counted there and never costs the answer.

Repaired, only with ``repair=True`` (``env.repair_calls``; the turn is then marked
``repaired``, so the strict format stays measurable): JSON that does not decode but whose
intent json-repair recovers (a question's ``"`` copied unescaped into a query, a stray
``}}}`` or ``"]`` copied from the hit format), and an id argument written as the label it was
copied from (``"[3]"``, ``"s12"``, ``"15476 p4251"``: the first number is the id; a whole
label only: ``"1.9"`` or ``"2 or 1"`` is refused, as 1.5 is). A repaired reading that makes no
valid call stays the strict error, malformed JSON.

The rollout must keep the closing ``</tool_call>`` in the generated text (with vLLM stop
strings, ``include_stop_str_in_output=True``); otherwise the call reads as unclosed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import json_repair

# ToolCall, the parser's result, is defined with the episode that records it: the tools take
# it too, and neither may import the parser (which imports the tools to know which exist).
from grasp.env.episode import ToolCall
from grasp.env.observations import escaped, quoted
from grasp.env.tool_specs import ParamSpec, ToolSpec
from grasp.env.tools import TOOLS, ToolRole, has_role
from grasp.types import ParseErrorKind

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

_CODE_FENCE = re.compile(r"\A```[A-Za-z]*\s*(.*?)\s*```\Z", re.DOTALL)
_DIGITS = re.compile(r"[+-]?[0-9]+")
_COPIED_ID = re.compile(r'\[?\s*[sp]?([0-9]{1,18})(?:\s+p[0-9]{1,18})?(?:\s+"[^"]*")?\s*\]?')
"""A whole label copied as an id (``fullmatch``): ``[3]``, ``s12``, ``15476 p4251``,
``[p19 "Title"]``; its group is the first number. Nothing else is read into it: ``"1.9"`` or
``"2 or 1"`` is no label, and is refused as the number 1.5 is."""
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
"""Half of a UTF-16 pair, which JSON's ``\\ud83d`` escape decodes to when its other half is
missing: no encoder's tokenizer takes it and no UTF-8 file can hold it."""
# Ids beyond this are surely hallucinated; the bound also keeps int() cheap on long strings.
_MAX_ID_DIGITS = 18


@dataclass(frozen=True)
class ParseError:
    """A typed parse failure; ``message`` is written for the model, as its observation."""

    kind: ParseErrorKind
    message: str


@dataclass(frozen=True)
class ParsedTurn:
    """One turn of generated text, parsed. Exactly one of ``call`` and ``error`` is set."""

    reasoning: str
    """The text before the first <tool_call>, stripped (all of it when there is none)."""
    call: ToolCall | None = None
    error: ParseError | None = None
    repaired: bool = False
    """The call parsed only after a repair (``repair=True``)."""

    def __post_init__(self) -> None:
        if (self.call is None) == (self.error is None):
            raise ValueError("ParsedTurn needs exactly one of call and error")


@dataclass
class _Repair:
    """Whether repairs are allowed, and whether one was made (set by the validators)."""

    allowed: bool
    used: bool = False


class _Invalid(Exception):
    """Internal: raised by the validators, always caught in parse_turn."""

    def __init__(self, kind: ParseErrorKind, message: str) -> None:
        super().__init__(message)
        self.error = ParseError(kind, message)


def parse_turn(
    text: str, allowed: Mapping[str, ToolSpec], max_query_chars: int = 512, repair: bool = False
) -> ParsedTurn:
    """Parse one turn of generated text into reasoning plus a tool call or a parse error.

    Args:
        text: The model's generated text for this turn only (never the prompt or observations).
        allowed: The tools this episode offers, keyed by name (see ``tool_specs``).
        max_query_chars: Longest ``query`` argument accepted, after stripping.
        repair: Repair undecodable JSON and ids copied as labels (module docstring).

    Never raises for a str ``text``.
    """
    start = text.find(TOOL_CALL_OPEN)
    if start < 0:
        return ParsedTurn(reasoning=text.strip(), error=_no_tool_call(text, allowed))
    reasoning = text[:start].strip()
    fix = _Repair(allowed=repair)
    try:
        call = _parse_call(text[start + len(TOOL_CALL_OPEN) :], allowed, max_query_chars, fix)
    except _Invalid as invalid:
        return ParsedTurn(reasoning=reasoning, error=invalid.error)
    return ParsedTurn(reasoning=reasoning, call=call, repaired=fix.used)


def _parse_call(
    after_open: str, allowed: Mapping[str, ToolSpec], max_query_chars: int, fix: _Repair
) -> ToolCall:
    """Validate the text after the first <tool_call>; raise _Invalid on any problem."""
    count = 1 + after_open.count(TOOL_CALL_OPEN)
    if count > 1:
        raise _multiple(count)
    end = _closing_tag(after_open)
    if end < 0:
        raise _Invalid(
            ParseErrorKind.UNCLOSED_TOOL_CALL,
            f"Error: {TOOL_CALL_OPEN} was never closed. Put the JSON call between "
            f"{TOOL_CALL_OPEN} and {TOOL_CALL_CLOSE}.",
        )
    body = after_open[:end]
    payload = _load_json(body, fix)
    json_repaired = fix.used
    try:
        name, raw_arguments = _split_call(payload)
        spec = _lookup(name, allowed)
        arguments = _validate_arguments(spec, raw_arguments, max_query_chars, fix)
    except _Invalid:
        if json_repaired:
            # json-repair's reading made no valid call (``{name: a query: b}`` read as the tool
            # "a query: b"): the text's fault is its JSON, as the strict parse says.
            _load_json(body, _Repair(allowed=False))  # raises its MALFORMED_JSON error
        raise
    return ToolCall(name=spec.name, arguments=arguments)


def _closing_tag(after_open: str) -> int:
    """Where the call's ``</tool_call>`` starts in ``after_open``, or -1 when it has none.

    The first tag outside a JSON string: one inside a string is the model's text
    (``{"answer": "x </tool_call> y"}``), not the end of the call. When a string is still open
    at the end of the text (its JSON is broken anyway), the first tag at all."""
    first = after_open.find(TOOL_CALL_CLOSE)
    if first < 0:
        return -1
    in_string = escaped_char = False
    for position, char in enumerate(after_open):
        if in_string:
            if escaped_char:
                escaped_char = False
            elif char == "\\":
                escaped_char = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif after_open.startswith(TOOL_CALL_CLOSE, position):
            return position
    return first if in_string else -1


def _repaired_json(body: str) -> Any:
    """json-repair's reading of ``body``: an object or a non-empty list, else None."""
    try:
        value = json_repair.loads(body)
    except Exception:  # noqa: BLE001 - a repair that fails leaves the strict error standing
        return None
    return value if isinstance(value, dict) or (isinstance(value, list) and value) else None


def _load_json(block: str, fix: _Repair) -> Any:
    body = block.strip()
    fenced = _CODE_FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    if not body:
        raise _malformed("the tool call is empty")
    try:
        return json.loads(body)
    # ValueError covers JSONDecodeError and over-long integer literals; RecursionError covers
    # pathologically nested input. Both are the model's text, so both are parse errors.
    except (ValueError, RecursionError) as exc:
        repaired = _repaired_json(body) if fix.allowed else None
        if repaired is not None:
            fix.used = True
            return repaired
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "unreadable JSON"
        raise _malformed(f"the tool call is not valid JSON ({detail})") from None


def _split_call(payload: Any) -> tuple[str, Any]:
    """Find the tool name and the raw arguments in the decoded JSON."""
    if isinstance(payload, list):
        if len(payload) > 1:
            raise _multiple(len(payload))
        payload = payload[0] if payload else None
    if not isinstance(payload, dict):
        raise _malformed("the tool call must be one JSON object")
    if isinstance(payload.get("function"), dict) and "name" not in payload:
        payload = payload["function"]  # OpenAI-style {"type": "function", "function": {...}}
    name = payload.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _malformed('the tool call has no "name" string')
    raw_arguments = payload.get("arguments", payload.get("parameters"))
    if isinstance(raw_arguments, str):
        try:
            raw_arguments = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except (ValueError, RecursionError):
            raise _malformed('"arguments" is a string that is not a JSON object') from None
    if raw_arguments is None:
        raw_arguments = {}
    if not isinstance(raw_arguments, dict):
        raise _malformed('"arguments" must be a JSON object')
    return name.strip(), raw_arguments


def _lookup(name: str, allowed: Mapping[str, ToolSpec]) -> ToolSpec:
    spec = allowed.get(name)
    if spec is not None:
        return spec
    available = _available(allowed)
    if name in TOOLS:  # registered, just not offered in this episode
        raise _Invalid(
            ParseErrorKind.TOOL_NOT_ALLOWED,
            f"Error: tool {quoted(_clip(name))} is not available here. Available tools: {available}.",
        )
    raise _Invalid(
        ParseErrorKind.UNKNOWN_TOOL,
        f"Error: unknown tool {quoted(_clip(name))}. Available tools: {available}.",
    )


def _validate_arguments(
    spec: ToolSpec, raw: dict[str, Any], max_query_chars: int, fix: _Repair | None = None
) -> dict[str, Any]:
    """Check raw arguments against the spec and return them normalized."""
    unexpected = [key for key in raw if key not in spec.parameters]
    if unexpected:
        raise _Invalid(
            ParseErrorKind.UNEXPECTED_ARGUMENT,
            f"Error: {spec.name} got an unexpected argument {quoted(_clip(unexpected[0]))}. "
            f"It takes: {_signature(spec)}. Example: {_example(spec)}",
        )
    given = {key: value for key, value in raw.items() if value is not None}
    for arg, param in spec.parameters.items():
        if param.required and arg not in given:
            raise _Invalid(
                ParseErrorKind.MISSING_ARGUMENT,
                f'Error: {spec.name} is missing the required argument "{arg}". '
                f"Example: {_example(spec)}",
            )
    if spec.exactly_one_of:
        chosen = [arg for arg in spec.exactly_one_of if arg in given]
        if len(chosen) != 1:
            options = " or ".join(spec.exactly_one_of)
            raise _invalid(spec, f"give exactly one of {options}, not {len(chosen)}")
    fix = fix or _Repair(allowed=False)
    return {
        arg: _coerce(spec, arg, spec.parameters[arg], value, max_query_chars, fix)
        for arg, value in given.items()
    }


def _coerce(
    spec: ToolSpec, arg: str, param: ParamSpec, value: Any, max_query_chars: int, fix: _Repair
) -> Any:
    if param.json_type == "integer":
        return _coerce_int(spec, arg, value, fix)
    if param.json_type == "string":
        return _coerce_str(spec, arg, value, max_query_chars)
    return value  # arrays: judged by their tool (answer's citations; module docstring)


def _coerce_int(spec: ToolSpec, arg: str, value: Any, fix: _Repair) -> int:
    number: int | None = None
    if isinstance(value, bool):
        number = None  # bool is an int subclass; true is not an id
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        digits = value.strip()
        number = int(digits) if len(digits.lstrip("+-")) <= _MAX_ID_DIGITS else None
    elif isinstance(value, str) and fix.allowed and _COPIED_ID.fullmatch(value.strip()):
        number = int(_COPIED_ID.fullmatch(value.strip()).group(1))
        fix.used = True
    if number is None:
        raise _invalid(spec, f"{arg} must be an integer id, got {_show(value)}")
    if number < 0:
        raise _invalid(spec, f"{arg} must not be negative, got {number}")
    return number


def _coerce_str(spec: ToolSpec, arg: str, value: Any, max_query_chars: int) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and _finite(value):
        value = str(value)
    if not isinstance(value, str):
        raise _invalid(spec, f"{arg} must be a string, got {_show(value)}")
    value = _LONE_SURROGATE.sub("\ufffd", value).strip()
    if not value:
        raise _invalid(spec, f"{arg} must not be empty")
    if arg == "query" and len(value) > max_query_chars:
        raise _invalid(
            spec, f"{arg} is {len(value)} characters long; keep it under {max_query_chars}"
        )
    return value


def _finite(number: int | float) -> bool:
    return isinstance(number, int) or math.isfinite(number)


# --- messages for the model -------------------------------------------------------------


def _no_tool_call(text: str, allowed: Mapping[str, ToolSpec]) -> ParseError:
    if TOOL_CALL_CLOSE in text:
        problem = f"{TOOL_CALL_CLOSE} without an opening {TOOL_CALL_OPEN}"
    else:
        problem = "no tool call found"
    lines = [f"Error: {problem}. Call exactly one tool per turn, e.g."]
    answers = [name for name in allowed if has_role(name, ToolRole.ANSWER)]
    example = next((s for s in allowed.values() if s.name not in answers), None)
    example = example or next(iter(allowed.values()), None)
    if example is not None:
        lines.append(f"{TOOL_CALL_OPEN}\n{_example(example)}\n{TOOL_CALL_CLOSE}")
    if answers:
        lines.append(f"To give your final answer, call {answers[0]}.")
    return ParseError(ParseErrorKind.NO_TOOL_CALL, "\n".join(lines))


def _malformed(problem: str) -> _Invalid:
    return _Invalid(
        ParseErrorKind.MALFORMED_JSON,
        f"Error: {problem}. Write exactly one JSON object between the tags: "
        f'{TOOL_CALL_OPEN}\n{{"name": <tool-name>, "arguments": {{...}}}}\n{TOOL_CALL_CLOSE}',
    )


def _multiple(count: int) -> _Invalid:
    return _Invalid(
        ParseErrorKind.MULTIPLE_TOOL_CALLS,
        f"Error: found {count} tool calls; none was run. Call exactly one tool per turn.",
    )


def _invalid(spec: ToolSpec, problem: str) -> _Invalid:
    return _Invalid(
        ParseErrorKind.INVALID_ARGUMENT,
        f"Error: invalid arguments for {spec.name}: {problem}. Example: {_example(spec)}",
    )


def _available(allowed: Mapping[str, ToolSpec]) -> str:
    return ", ".join(str(name) for name in allowed) or "(none)"


def _signature(spec: ToolSpec) -> str:
    parts = [
        f"{arg} ({param.json_type}{', required' if param.required else ''})"
        for arg, param in spec.parameters.items()
    ]
    if spec.exactly_one_of:
        parts.append(f"exactly one of {' or '.join(spec.exactly_one_of)}")
    return ", ".join(parts)


def _example(spec: ToolSpec) -> str:
    """A valid call of the tool, with placeholders, as the model should write it."""
    placeholders = {"string": '"..."', "integer": "<integer>"}
    wanted = [arg for arg, param in spec.parameters.items() if param.required]
    if spec.exactly_one_of:
        wanted.append(spec.exactly_one_of[0])
    arguments = ", ".join(
        f'"{arg}": {placeholders.get(spec.parameters[arg].json_type, "...")}' for arg in wanted
    )
    return f'{{"name": "{spec.name}", "arguments": {{{arguments}}}}}'


def _show(value: Any) -> str:
    """A short JSON rendering of a bad value, so the message stays short; the controls and
    bidirectional characters JSON leaves raw (DEL, C1, U+202E...) escaped (``escaped``)."""
    try:
        shown = json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        shown = type(value).__name__
    return escaped(_clip(shown))


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
