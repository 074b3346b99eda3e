"""How backend replies are read: answers, reasoning sentences, grades, routes, queries."""

from __future__ import annotations

import pytest

from grasp.baselines.prompts import (
    UNKNOWN,
    answer_prompt,
    clean_answer,
    clean_query,
    is_relevant,
    read_reasoning,
    read_route_letter,
)


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("Auckland", "Auckland"),
        ("Answer: Auckland.", "Auckland"),
        ("The answer is Polonium and radium.\nBecause ...", "Polonium and radium"),
        ("So the answer is: yes", "yes"),
        ('  "Google"  ', "Google"),
        ("\n\nFinal answer - 1953", "1953"),
        ("St. Louis", "St. Louis"),
        ("<tool_call>", UNKNOWN),
        ("", UNKNOWN),
    ],
)
def test_clean_answer(reply, answer):
    assert clean_answer(reply) == answer


@pytest.mark.parametrize(
    ("reply", "sentence", "answer"),
    [
        ("Hillary was born in Auckland. He climbed.", "Hillary was born in Auckland.", None),
        ("Hillary was born in Auckland. So the answer is: Auckland.", None, "Auckland"),
        ("so the answer is Auckland", "so the answer is", "Auckland"),
        ("The answer is: Auckland.", "The answer is:", "Auckland"),
        ("I think the answer is in Auckland.", "I think the answer is in Auckland.", None),
        ("The creator is Guido\nvan Rossum.", "The creator is Guido", None),
        ("", "", None),
    ],
)
def test_read_reasoning(reply, sentence, answer):
    step = read_reasoning(reply)
    assert step.answer == answer
    if sentence is not None:
        assert step.sentence == sentence
    else:
        assert step.sentence == "Hillary was born in Auckland. So the answer is:"


@pytest.mark.parametrize(
    ("reply", "relevant"),
    [("Yes", True), ("yes, it mentions him", True), ("Relevant.", True), ("No", False),
     ("irrelevant", False), ("", False), ("The passage says yes", False)],
)  # fmt: skip
def test_is_relevant(reply, relevant):
    assert is_relevant(reply) is relevant


@pytest.mark.parametrize(
    ("reply", "letter"),
    [("C", "C"), ("B: one search", "B"), ("The answer is A.", "A"), ("Answer", None), ("", None)],
)
def test_read_route_letter(reply, letter):
    assert read_route_letter(reply) == letter


def test_clean_query_and_answer_prompt():
    assert clean_query('Query: "Edmund Hillary birthplace"\nmore', 512) == (
        "Edmund Hillary birthplace"
    )
    assert clean_query("abcdef", 3) == "abc"
    prompt = answer_prompt("Who?", [], max_chars=10, max_new_tokens=7, reasoning=["A. B."])
    assert prompt.user == "Question: Who?\n\nReasoning: A. B.\nAnswer:"
    assert (prompt.max_new_tokens, prompt.purpose) == (7, "answer")
