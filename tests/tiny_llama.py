"""The tests' randomly initialised Llama: 2 layers, 64 wide, 4 heads sharing 2 key/value heads.

``tiny_llama_config(vocab_size, **fields)`` is its LlamaConfig; ``fields`` set the rest (token
ids, positions, tied embeddings). Tests in any folder import it (pytest puts tests/ on the path
for its conftest.py).
"""

from __future__ import annotations

from typing import Any


def tiny_llama_config(vocab_size: int, **fields: Any):
    from transformers import LlamaConfig

    shape = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    }
    return LlamaConfig(vocab_size=vocab_size, **{**shape, **fields})
