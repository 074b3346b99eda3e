"""A tiny random-weight Llama with SmolLM2's tokenizer: GRPO steps in seconds on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from grasp.data import write_normalized
from grasp.models import ModelConfig, prepare_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 64-wide Llama saved with the (Qwen2.5-templated) SmolLM2 tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(prepare_model(ModelConfig()))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    directory = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_questions_file(tmp_path_factory, tiny_questions) -> Path:
    """The tiny corpus's questions, repeated under new ids so that both halves are non-empty."""
    import dataclasses

    questions = [
        dataclasses.replace(q, question_id=f"{q.question_id}-{copy}")
        for copy in range(4)
        for q in tiny_questions
    ]
    return write_normalized(questions, tmp_path_factory.mktemp("questions") / "dev.jsonl")
