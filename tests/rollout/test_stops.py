"""stop_token_ids: the one definition of where a turn ends, on a real (word-level) tokenizer and
transformers' GenerationConfig, with Qwen2.5-Instruct's layout of eos ids."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GenerationConfig, PreTrainedTokenizerFast

from grasp.rollout.stops import declared_eos_ids, stop_token_ids

VOCAB = {"<unk>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "<|endoftext|>": 3, "Paris": 4}


def tokenizer(eos: str | None) -> PreTrainedTokenizerFast:
    inner = Tokenizer(models.WordLevel(VOCAB, unk_token="<unk>"))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=inner, unk_token="<unk>")
    fast.add_special_tokens(
        {"additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]}
    )
    fast.eos_token = eos
    return fast


@pytest.mark.parametrize(
    ("eos", "generation_config", "expected"),
    [
        # Qwen2.5-Instruct: the tokenizer names <|im_end|>, the model also <|endoftext|>.
        ("<|im_end|>", GenerationConfig(eos_token_id=[2, 3]), [2, 3]),
        ("<|im_end|>", GenerationConfig(eos_token_id=3), [2, 3]),
        ("<|endoftext|>", None, [2, 3]),  # a base model's tokenizer
        ("<|im_end|>", None, [2]),
        ("<|im_end|>", {"eos_token_id": [3, 2]}, [2, 3]),  # vLLM's dict form
        (None, GenerationConfig(), [2]),
    ],
)
def test_end_of_turn_first_then_every_declared_eos(eos, generation_config, expected) -> None:
    assert stop_token_ids(tokenizer(eos), generation_config) == expected


def test_declared_eos_ids_reads_every_form() -> None:
    assert declared_eos_ids(None) == []
    assert declared_eos_ids({"eos_token_id": None}) == []
    assert declared_eos_ids(GenerationConfig(eos_token_id=[5, None, 7])) == [5, 7]


def test_an_end_of_turn_token_that_is_not_one_token_is_refused() -> None:
    with pytest.raises(ValueError, match="'Paris Paris' is not a single token"):
        stop_token_ids(tokenizer("<|im_end|>"), None, end_of_turn_token="Paris Paris")
