"""Where every policy is built: from configuration (scripted, transformers, vLLM or an
OpenAI-compatible server), or around a transformers model already in memory.

built = build_policy(PolicyConfig(kind="hf"), tool_schemas)
engine = RolloutEngine(env, built.policy, rollout_config, chat=built.chat)

``model_policy`` is the one constructor of a transformers policy: ``build_policy``'s hf kind,
training's rollouts of the trainer's current weights (grasp/train/trl_bridge.py), a run's own
evaluations (grasp/train/trainer.py) and the judge (grasp/eval/judge.py) all build theirs there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from grasp.models import (
    ChatTemplate,
    ModelConfig,
    load_policy_model,
    prepare_model,
    qwen2_5_template,
)
from grasp.rollout.chat import ChatTokenizer
from grasp.rollout.policy import Policy
from grasp.rollout.scripted import HeuristicSearchPolicy
from grasp.types import StrEnum, check_range, parse_enum


class PolicyKind(StrEnum):
    SCRIPTED = "scripted"
    """The heuristic search agent (no model): both searches, reads, a second search, answer."""
    HF = "hf"
    """A transformers model generating from token ids (CPU or GPU)."""
    VLLM = "vllm"
    """A colocated vLLM engine (GPU)."""
    OPENAI = "openai"
    """Any OpenAI-compatible chat-completions endpoint (a served model as prompted baseline)."""


@dataclass
class PolicyConfig:
    """Which policy acts in the environment."""

    kind: str = "scripted"
    """scripted, hf, vllm or openai."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The model of hf and vllm policies (and the tokenizer of an openai one, if local)."""
    adapters: list[str] = field(default_factory=list)
    """hf: LoRA adapter folders applied to the model in order, all merged but the last
    (grasp/rollout/adapters.py); how a trained run's policy is rebuilt."""
    max_batch_size: int | None = 32
    """hf: rows per generate call (bounds memory); null puts every episode in one call."""
    reuse_cache: bool = False
    """hf: each turn prefills only the tokens appended since the episode's previous turn,
    continuing its KV cache (grasp/rollout/hf_policy.py); greedy tokens as a full prefill's
    up to rounding."""
    scripted_reads: int = 2
    """scripted: paragraphs read after the first two searches."""
    base_url: str = ""
    """openai: API root including the version, e.g. http://localhost:8000/v1."""
    served_model: str = ""
    """openai: the model name the server expects."""
    api_key_env: str = "OPENAI_API_KEY"
    """openai: environment variable holding the API key (read when the policy is built)."""
    max_concurrency: int = 8
    """openai: requests in flight at once."""
    gpu_memory_utilization: float = 0.6
    """vllm: share of GPU memory the engine may take."""

    def __post_init__(self) -> None:
        self.kind = parse_enum(PolicyKind, self.kind, "policy.kind")
        check_range("policy.scripted_reads", self.scripted_reads, low=0)
        if self.max_batch_size is not None:
            check_range("policy.max_batch_size", self.max_batch_size, low=1)
        check_range("policy.max_concurrency", self.max_concurrency, low=1)


@dataclass
class BuiltPolicy:
    """A ready policy, and the chat tokenizer for token bookkeeping when it has one."""

    policy: Policy
    chat: ChatTokenizer | None
    model: Any = None
    """The underlying model (hf), for the trainer to share."""


def build_policy(config: PolicyConfig, tool_schemas: Sequence[dict]) -> BuiltPolicy:
    """Load whatever the policy needs; scripted and openai policies load no model."""
    kind = PolicyKind(config.kind)
    if kind is PolicyKind.SCRIPTED:
        return BuiltPolicy(HeuristicSearchPolicy(reads=config.scripted_reads), chat=None)
    if config.adapters and kind is not PolicyKind.HF:
        raise ValueError(f"policy.adapters apply to policy.kind=hf only, not {kind}")
    if kind is PolicyKind.OPENAI:
        from grasp.rollout.openai_policy import OpenAIChatPolicy

        if not config.base_url or not config.served_model:
            raise ValueError("policy.kind=openai needs policy.base_url and policy.served_model")
        policy = OpenAIChatPolicy(
            config.base_url,
            config.served_model,
            api_key=os.environ.get(config.api_key_env),
            max_concurrency=config.max_concurrency,
            tools=list(tool_schemas),
        )
        return BuiltPolicy(policy, chat=None)
    if kind is PolicyKind.HF:
        from grasp.rollout.adapters import apply_adapters

        loaded = load_policy_model(config.model)
        model = apply_adapters(loaded.model, config.adapters)
        chat = ChatTokenizer(loaded.tokenizer, tool_schemas)
        policy = model_policy(
            model,
            loaded.tokenizer,
            max_batch_size=config.max_batch_size,
            reuse_cache=config.reuse_cache,
        )
        return BuiltPolicy(policy, chat=chat, model=model)
    from grasp.rollout.vllm_policy import VLLMPolicy, _import_vllm

    vllm = _import_vllm()
    llm = vllm.LLM(
        model=str(prepare_model(config.model)),
        dtype=config.model.dtype,
        gpu_memory_utilization=config.gpu_memory_utilization,
    )
    tokenizer = llm.get_tokenizer()
    if config.model.chat_template == ChatTemplate.QWEN2_5:
        tokenizer.chat_template = qwen2_5_template()
    return BuiltPolicy(VLLMPolicy(llm), chat=ChatTokenizer(tokenizer, tool_schemas))


def model_policy(
    model: Any,
    tokenizer: Any,
    *,
    end_of_turn_token: str | None = None,
    max_batch_size: int | None = None,
    reuse_cache: bool = False,
    autocast_dtype: Any = None,
    native_gqa: bool = True,
) -> Policy:
    """A transformers policy (``HFPolicy``) over ``model``, already loaded.

    ``end_of_turn_token``: where a turn ends (None: the policy's default, ``<|im_end|>``);
    ``max_batch_size``: rows per ``generate`` call; ``reuse_cache``: continue each episode's KV
    cache across turns; ``autocast_dtype``: generate under autocast (bf16 rollouts of fp32
    master weights); ``native_gqa``: grouped-query attention with masks on the CPU."""
    from grasp.rollout.hf_policy import HFPolicy

    extra = {} if end_of_turn_token is None else {"end_of_turn_token": end_of_turn_token}
    return HFPolicy(
        model,
        tokenizer,
        max_batch_size=max_batch_size,
        reuse_cache=reuse_cache,
        autocast_dtype=autocast_dtype,
        native_gqa=native_gqa,
        **extra,
    )
