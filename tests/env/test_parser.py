"""Tests of grasp.env.parser: a table of valid calls and of every error kind, the messages the
model sees, and fuzzing that parse_turn never raises and keeps its invariants."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grasp.env.parser import ParsedTurn, ParseError, ParseErrorKind, ToolCall, parse_turn
from grasp.env.tool_specs import tool_schema, tool_specs
from grasp.env.tools import tool_names
from grasp.types import ToolName

K = ParseErrorKind
GRASP = tool_specs(
    [ToolName.SEMANTIC_SEARCH, ToolName.KEYWORD_SEARCH, ToolName.READ_PARAGRAPH, ToolName.ANSWER]
)
SEARCH_R1 = tool_specs([ToolName.SEARCH, ToolName.ANSWER])
ALL = tool_specs(tool_names())


def wrap(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


def call(name: str, **arguments) -> str:
    return wrap(json.dumps({"name": name, "arguments": arguments}))


# (id, text, expected tool, expected arguments) — parsed against GRASP unless noted.
VALID = [
    ("semantic", call("semantic_search", query="director of Alien"), "semantic_search",
     {"query": "director of Alien"}),
    ("keyword", call("keyword_search", query="Ridley Scott"), "keyword_search",
     {"query": "Ridley Scott"}),
    ("read_by_sentence", call("read_paragraph", sentence_id=12), "read_paragraph",
     {"sentence_id": 12}),
    ("read_by_paragraph", call("read_paragraph", paragraph_id=0), "read_paragraph",
     {"paragraph_id": 0}),
    ("answer", call("answer", answer="Ridley Scott"), "answer", {"answer": "Ridley Scott"}),
    ("query_stripped", call("semantic_search", query="  Alien \n"), "semantic_search",
     {"query": "Alien"}),
    ("id_as_string", call("read_paragraph", sentence_id=" 12 "), "read_paragraph",
     {"sentence_id": 12}),
    ("id_as_integral_float", call("read_paragraph", paragraph_id=7.0), "read_paragraph",
     {"paragraph_id": 7}),
    ("null_other_id", call("read_paragraph", sentence_id=None, paragraph_id=3), "read_paragraph",
     {"paragraph_id": 3}),
    ("numeric_answer", call("answer", answer=1984), "answer", {"answer": "1984"}),
    ("float_answer", call("answer", answer=3.5), "answer", {"answer": "3.5"}),
    ("parameters_key", wrap('{"name": "keyword_search", "parameters": {"query": "Alien"}}'),
     "keyword_search", {"query": "Alien"}),
    ("arguments_as_string",
     wrap(json.dumps({"name": "read_paragraph", "arguments": '{"sentence_id": 4}'})),
     "read_paragraph", {"sentence_id": 4}),
    ("no_whitespace", '<tool_call>{"name":"answer","arguments":{"answer":"yes"}}</tool_call>',
     "answer", {"answer": "yes"}),
    ("much_whitespace", '<tool_call>\n\n  {"name": "answer",\n "arguments": {"answer": "no"}}  '
     "\n\n</tool_call>", "answer", {"answer": "no"}),
    ("code_fence", wrap('```json\n{"name": "answer", "arguments": {"answer": "no"}}\n```'),
     "answer", {"answer": "no"}),
    ("openai_wrapper", wrap(json.dumps({"type": "function", "function": {
        "name": "semantic_search", "arguments": '{"query": "Alien"}'}})),
     "semantic_search", {"query": "Alien"}),
    ("one_element_list", wrap('[{"name": "answer", "arguments": {"answer": "x"}}]'), "answer",
     {"answer": "x"}),
    ("name_whitespace", wrap('{"name": " answer ", "arguments": {"answer": "x"}}'), "answer",
     {"answer": "x"}),
    ("text_after_close", call("answer", answer="x") + "\nI have answered.", "answer",
     {"answer": "x"}),
    ("unicode", call("semantic_search", query="Škoda Auto \u00e9"), "semantic_search",
     {"query": "Škoda Auto \u00e9"}),
]  # fmt: skip


@pytest.mark.parametrize("text, name, arguments", [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_calls(text, name, arguments):
    turn = parse_turn("Let me think.\n" + text, GRASP)
    assert turn.error is None
    assert turn.call == ToolCall(name=ToolName(name), arguments=arguments)
    assert type(turn.call.name) is ToolName
    assert turn.reasoning == "Let me think."


def test_search_r1_tool_set():
    turn = parse_turn(call("search", query="Alien 1979"), SEARCH_R1)
    assert turn.call == ToolCall(ToolName.SEARCH, {"query": "Alien 1979"})
    assert turn.reasoning == ""


LONG = "x" * 513

# (id, text, expected kind) — parsed against GRASP with max_query_chars=512.
ERRORS = [
    ("plain_text", "The answer is Ridley Scott.", K.NO_TOOL_CALL),
    ("empty_text", "", K.NO_TOOL_CALL),
    ("close_only", '{"name": "answer", "arguments": {"answer": "x"}}</tool_call>', K.NO_TOOL_CALL),
    ("bad_json", wrap('{"name": "answer", "arguments": {"answer": "x"}'), K.MALFORMED_JSON),
    ("empty_block", "<tool_call>\n \n</tool_call>", K.MALFORMED_JSON),
    ("single_quotes", wrap("{'name': 'answer', 'arguments': {'answer': 'x'}}"), K.MALFORMED_JSON),
    ("not_an_object", wrap('"answer"'), K.MALFORMED_JSON),
    ("empty_list", wrap("[]"), K.MALFORMED_JSON),
    ("no_name", wrap('{"arguments": {"answer": "x"}}'), K.MALFORMED_JSON),
    ("name_not_string", wrap('{"name": 3, "arguments": {}}'), K.MALFORMED_JSON),
    ("arguments_list", wrap('{"name": "answer", "arguments": ["x"]}'), K.MALFORMED_JSON),
    ("arguments_bad_string", wrap('{"name": "answer", "arguments": "x"}'), K.MALFORMED_JSON),
    ("huge_int_literal", wrap('{"name": "read_paragraph", "arguments": {"sentence_id": '
                              + "9" * 5000 + "}}"), K.MALFORMED_JSON),
    ("deep_nesting", wrap("[" * 100_000 + "]" * 100_000), K.MALFORMED_JSON),
    ("unknown_tool", call("search_web", query="x"), K.UNKNOWN_TOOL),
    ("wrong_case_tool", call("Answer", answer="x"), K.UNKNOWN_TOOL),
    ("not_offered", call("search", query="x"), K.TOOL_NOT_ALLOWED),
    ("missing_query", call("semantic_search"), K.MISSING_ARGUMENT),
    ("null_query", call("keyword_search", query=None), K.MISSING_ARGUMENT),
    ("no_arguments_key", wrap('{"name": "answer"}'), K.MISSING_ARGUMENT),
    ("unexpected", call("semantic_search", query="x", k=5), K.UNEXPECTED_ARGUMENT),
    ("renamed_argument", call("semantic_search", q="x"), K.UNEXPECTED_ARGUMENT),
    ("query_not_string", call("semantic_search", query=["a", "b"]), K.INVALID_ARGUMENT),
    ("answer_bool", call("answer", answer=True), K.INVALID_ARGUMENT),
    ("answer_nan", wrap('{"name": "answer", "arguments": {"answer": NaN}}'), K.INVALID_ARGUMENT),
    ("empty_query", call("semantic_search", query="   "), K.INVALID_ARGUMENT),
    ("long_query", call("keyword_search", query=LONG), K.INVALID_ARGUMENT),
    ("both_ids", call("read_paragraph", sentence_id=1, paragraph_id=2), K.INVALID_ARGUMENT),
    ("neither_id", call("read_paragraph"), K.INVALID_ARGUMENT),
    ("both_ids_null", call("read_paragraph", sentence_id=None, paragraph_id=None),
     K.INVALID_ARGUMENT),
    ("negative_id", call("read_paragraph", sentence_id=-1), K.INVALID_ARGUMENT),
    ("negative_id_string", call("read_paragraph", sentence_id="-3"), K.INVALID_ARGUMENT),
    ("fractional_id", call("read_paragraph", paragraph_id=1.5), K.INVALID_ARGUMENT),
    ("word_id", call("read_paragraph", paragraph_id="twelve"), K.INVALID_ARGUMENT),
    ("bool_id", call("read_paragraph", paragraph_id=True), K.INVALID_ARGUMENT),
    ("long_digit_id", call("read_paragraph", paragraph_id="9" * 40), K.INVALID_ARGUMENT),
    ("two_blocks", call("semantic_search", query="a") + call("keyword_search", query="b"),
     K.MULTIPLE_TOOL_CALLS),
    ("two_opens_one_close", "<tool_call>\n<tool_call>" + call("answer", answer="x"),
     K.MULTIPLE_TOOL_CALLS),
    ("list_of_two", wrap('[{"name": "answer", "arguments": {"answer": "x"}}, '
                         '{"name": "answer", "arguments": {"answer": "y"}}]'),
     K.MULTIPLE_TOOL_CALLS),
    ("unclosed", '<tool_call>\n{"name": "answer", "arguments": {"answer": "x"}}',
     K.UNCLOSED_TOOL_CALL),
    ("unclosed_empty", "Thinking...<tool_call>", K.UNCLOSED_TOOL_CALL),
]  # fmt: skip


@pytest.mark.parametrize("text, kind", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors(text, kind):
    turn = parse_turn(text, GRASP, max_query_chars=512)
    assert turn.call is None
    assert turn.error is not None
    assert turn.error.kind is kind
    assert turn.error.message.startswith("Error: ")


def test_every_error_kind_is_in_the_table():
    assert {kind for *_, kind in ERRORS} == set(ParseErrorKind)


def test_query_at_the_limit_is_accepted():
    turn = parse_turn(call("semantic_search", query="x" * 20), GRASP, max_query_chars=20)
    assert turn.call == ToolCall(ToolName.SEMANTIC_SEARCH, {"query": "x" * 20})
    turn = parse_turn(call("semantic_search", query="x" * 21), GRASP, max_query_chars=20)
    assert turn.error.kind is K.INVALID_ARGUMENT
    assert "20" in turn.error.message


def test_query_limit_does_not_apply_to_answers():
    turn = parse_turn(call("answer", answer=LONG), GRASP, max_query_chars=512)
    assert turn.call == ToolCall(ToolName.ANSWER, {"answer": LONG})


def test_reasoning_is_text_before_the_first_call():
    turn = parse_turn("  I should search.\n\n" + call("answer", answer="x"), GRASP)
    assert turn.reasoning == "I should search."
    turn = parse_turn("First.\n" + call("answer", answer="a") + call("answer", answer="b"), GRASP)
    assert turn.reasoning == "First."
    assert turn.error.kind is K.MULTIPLE_TOOL_CALLS


def test_no_tool_call_keeps_the_whole_text_as_reasoning():
    text = "\n  The answer is Ridley Scott.\nHe directed Alien.  "
    turn = parse_turn(text, GRASP)
    assert turn.reasoning == text.strip()
    assert turn.error.kind is K.NO_TOOL_CALL


# --- messages written for the model -------------------------------------------------------


def test_unknown_tool_message_lists_the_available_tools():
    turn = parse_turn(call("search_web", query="x"), GRASP)
    assert turn.error.message == (
        'Error: unknown tool "search_web". '
        "Available tools: semantic_search, keyword_search, read_paragraph, answer."
    )


def test_tool_not_allowed_message_lists_the_available_tools():
    message = parse_turn(call("semantic_search", query="x"), SEARCH_R1).error.message
    assert '"semantic_search" is not available' in message
    assert message.endswith("Available tools: search, answer.")


def test_missing_argument_message_names_the_argument_and_shows_a_call():
    message = parse_turn(call("semantic_search"), GRASP).error.message
    assert 'missing the required argument "query"' in message
    assert '{"name": "semantic_search", "arguments": {"query": "..."}}' in message


def test_unexpected_argument_message_names_it_and_the_real_ones():
    message = parse_turn(call("semantic_search", q="x"), GRASP).error.message
    assert 'unexpected argument "q"' in message
    assert "query (string, required)" in message


def test_read_paragraph_id_messages():
    both = parse_turn(call("read_paragraph", sentence_id=1, paragraph_id=2), GRASP)
    assert "exactly one of sentence_id or paragraph_id" in both.error.message
    negative = parse_turn(call("read_paragraph", sentence_id=-1), GRASP)
    assert "sentence_id must not be negative" in negative.error.message
    word = parse_turn(call("read_paragraph", paragraph_id="twelve"), GRASP)
    assert 'paragraph_id must be an integer id, got "twelve"' in word.error.message
    assert '{"name": "read_paragraph", "arguments": {"sentence_id": <integer>}}' in (
        word.error.message
    )


def test_no_tool_call_message_shows_a_call_and_how_to_answer():
    message = parse_turn("I think it is Paris.", GRASP).error.message
    assert "no tool call" in message
    assert (
        '<tool_call>\n{"name": "semantic_search", "arguments": {"query": "..."}}\n</tool_call>'
        in (message)
    )
    assert "call answer" in message


def test_malformed_and_structural_messages():
    malformed = parse_turn(wrap("{'name': 'answer'}"), GRASP).error.message
    assert "not valid JSON" in malformed and '"arguments"' in malformed
    multiple = parse_turn(call("answer", answer="a") * 2, GRASP).error.message
    assert "found 2 tool calls; none was run" in multiple
    unclosed = parse_turn("<tool_call>{}", GRASP).error.message
    assert "</tool_call>" in unclosed


def test_messages_stay_short_for_huge_bad_values():
    turn = parse_turn(call("read_paragraph", sentence_id="y" * 10_000), GRASP)
    assert turn.error.kind is K.INVALID_ARGUMENT
    assert len(turn.error.message) < 300


# --- round trip through the chat template --------------------------------------------------


def test_the_templates_own_tool_call_rendering_parses_back():
    chat_template_utils = pytest.importorskip("trl.chat_template_utils")
    from transformers.utils.chat_template_utils import render_jinja_template

    tool_calls = [{"type": "function", "function": {
        "name": "read_paragraph", "arguments": {"sentence_id": 42}}}]  # fmt: skip
    messages = [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "I need the paragraph.", "tool_calls": tool_calls},
    ]
    rendered, _ = render_jinja_template(
        conversations=[messages],
        tools=[tool_schema(name) for name in GRASP],
        chat_template=chat_template_utils.qwen2_5_chat_template,
    )
    assistant = rendered[0].rsplit("<|im_start|>assistant\n", 1)[1].removesuffix("<|im_end|>\n")
    turn = parse_turn(assistant, GRASP)
    assert turn == ParsedTurn(
        reasoning="I need the paragraph.",
        call=ToolCall(ToolName.READ_PARAGRAPH, {"sentence_id": 42}),
    )


# --- invariants under fuzzing --------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
GOOD_VALUES = st.text(min_size=1, max_size=20) | st.integers(min_value=0) | st.just("12")
BAD_VALUES = JSON | st.sampled_from(["-4", "1.5", "", "  ", LONG, -1, 2.0, True])


@st.composite
def call_shaped(draw) -> dict:
    """A {"name", "arguments"} object, mostly for a real tool with mostly plausible arguments,
    so that fuzzing reaches both valid calls and every argument check."""
    junk_name = draw(st.integers(0, 7)) == 0
    name = draw(st.sampled_from(["search_web", "", "Answer"] if junk_name else list(ALL)))
    params = list(ALL[name].parameters) if name in ALL else ["query"]
    keys = draw(st.lists(st.sampled_from(params), min_size=1, max_size=2, unique=True))
    if draw(st.integers(0, 7)) == 0:
        keys.append("k")
    values = GOOD_VALUES if draw(st.integers(0, 3)) else BAD_VALUES
    return {"name": name, "arguments": {key: draw(values) for key in keys}}


ALLOWED = st.sampled_from([GRASP, SEARCH_R1, ALL, {}])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_invariants(turn: ParsedTurn, allowed) -> None:
    assert isinstance(turn, ParsedTurn)
    assert (turn.call is None) != (turn.error is None)
    assert isinstance(turn.reasoning, str)
    if turn.error is not None:
        assert isinstance(turn.error, ParseError)
        assert isinstance(turn.error.kind, ParseErrorKind)
        assert turn.error.message.startswith("Error: ")
        return
    spec = allowed[turn.call.name]
    assert turn.call.name in allowed
    assert set(turn.call.arguments) <= set(spec.parameters)
    required = {arg for arg, param in spec.parameters.items() if param.required}
    assert required <= set(turn.call.arguments)
    for arg, value in turn.call.arguments.items():
        expected_type = {"string": str, "integer": int}[spec.parameters[arg].json_type]
        assert type(value) is expected_type
        if expected_type is str:
            assert value and value == value.strip()
        else:
            assert value >= 0
    if spec.exactly_one_of:
        assert len(set(spec.exactly_one_of) & set(turn.call.arguments)) == 1


@FUZZ
@given(text=st.text(), allowed=ALLOWED)
def test_fuzz_arbitrary_text(text, allowed):
    check_invariants(parse_turn(text, allowed), allowed)


@FUZZ
@given(
    before=st.text(max_size=30),
    inner=st.text(),
    after=st.text(max_size=30),
    allowed=ALLOWED,
)
def test_fuzz_arbitrary_text_in_tags(before, inner, after, allowed):
    turn = parse_turn(f"{before}<tool_call>{inner}</tool_call>{after}", allowed)
    check_invariants(turn, allowed)


@FUZZ
@given(value=JSON, allowed=ALLOWED)
def test_fuzz_arbitrary_json_in_tags(value, allowed):
    check_invariants(parse_turn(wrap(json.dumps(value)), allowed), allowed)


@FUZZ
@given(
    payload=call_shaped(), key=st.sampled_from(["arguments", "parameters"]), as_string=st.booleans()
)
def test_fuzz_call_shaped_json(payload, key, as_string):
    arguments = payload["arguments"]
    body = {"name": payload["name"], key: json.dumps(arguments) if as_string else arguments}
    turn = parse_turn("Thinking.\n" + wrap(json.dumps(body)), ALL, max_query_chars=512)
    check_invariants(turn, ALL)
    assert turn.reasoning == "Thinking."


def test_echoed_names_and_values_escape_control_and_bidirectional_characters():
    """Issue 36 item 5: the model's text inside an error's quotes cannot reorder or hide it."""
    unknown = parse_turn(call("search\u202e\x00", query="x"), GRASP).error.message
    assert unknown.startswith('Error: unknown tool "search\\u202e\\x00". Available tools:')
    unexpected = parse_turn(call("semantic_search", **{'q\u2067"': "x"}), GRASP).error.message
    assert 'unexpected argument "q\\u2067\\"". It takes:' in unexpected
    value = parse_turn(call("read_paragraph", paragraph_id="1\u202e2\x85"), GRASP).error.message
    assert 'paragraph_id must be an integer id, got "1\\u202e2\\x85".' in value
    printable = parse_turn(call("read_paragraph", paragraph_id="Zoë 東京"), GRASP).error.message
    assert 'got "Zoë 東京".' in printable


@pytest.mark.parametrize("repair", [False, True])
def test_a_closing_tag_inside_a_string_is_part_of_the_string(repair):
    """Issue 48 (minor): ``{"answer": "x </tool_call> y"}`` was cut at the tag in the string,
    and repair made the answer "x"."""
    text = call("answer", answer="x </tool_call> y") + " trailing words"
    turn = parse_turn(text, GRASP, repair=repair)
    assert turn.call == ToolCall(name="answer", arguments={"answer": "x </tool_call> y"})
    assert not turn.repaired
    unclosed = '<tool_call>\n{"name": "answer", "arguments": {"answer": "x </tool_call> y"}}'
    assert parse_turn(unclosed, GRASP, repair=repair).error.kind is K.UNCLOSED_TOOL_CALL


@pytest.mark.parametrize("name", ["semantic_search", "keyword_search", "answer"])
def test_a_lone_surrogate_escape_becomes_a_replacement_character(name):
    """Issue 48 item 4: half an emoji's escape (``\\ud83d``) decodes to a lone surrogate, which
    no encoder takes and no UTF-8 file can hold; every string argument gets U+FFFD in its
    place, and the halves of a whole pair still make the emoji."""
    argument = "answer" if name == "answer" else "query"
    text = wrap(f'{{"name": "{name}", "arguments": {{"{argument}": "Marie Curie \\ud83d"}}}}')
    turn = parse_turn(text, GRASP)
    assert turn.call.arguments == {argument: "Marie Curie \ufffd"}
    turn.call.arguments[argument].encode("utf-8")  # raises on a lone surrogate
    pair = wrap(f'{{"name": "{name}", "arguments": {{"{argument}": "Curie \\ud83d\\ude00"}}}}')
    assert parse_turn(pair, GRASP).call.arguments == {argument: "Curie \U0001f600"}
    low_first = wrap(f'{{"name": "{name}", "arguments": {{"{argument}": "\\ude00\\ud83d x"}}}}')
    assert parse_turn(low_first, GRASP).call.arguments == {argument: "\ufffd\ufffd x"}
