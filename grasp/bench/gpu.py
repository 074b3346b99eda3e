"""The GPU check's model phases, on a randomly initialised Qwen2.5-3B.

``grpo_step`` (one GRPO micro-batch and optimizer step, full fine-tuning and LoRA),
``rollout_hf`` (``HFPolicy`` generation) and ``dense_search`` (exact top-k, torch on the GPU
against FAISS or NumPy on the CPU). ``grasp/bench/gpu_driver.py`` runs each in a process of
its own, with its time cap; ``scripts/gpu_check.py``'s docstring says what each measures and
how to run the check.

Imports only torch, numpy and grasp modules that need nothing more at import time;
transformers, tokenizers, peft and faiss are imported by the phases that use them: the GPU
machine has torch and transformers, not trl, datasets or faiss.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from grasp.models import ModelConfig, load_dtype_for_training
from grasp.paths import REPO_ROOT
from grasp.rollout.hf_policy import HFPolicy
from grasp.rollout.policy import GenerationRequest, SamplingConfig

CONFIG = REPO_ROOT / "configs" / "gpu_check" / "qwen2.5_3b_config.json"
Progress = Callable[[dict], None] | None
"""Called with a phase's result so far, so that a phase stopped at its time cap keeps it."""
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class Shapes:
    """The sizes one run measures at."""

    micro_batch: int
    """Sequences per GRPO micro-batch (the paper's per-device batch)."""
    seq_lens: list[int]
    """Total tokens per training sequence (prompt + completion), each measured."""
    prompt_len: int
    """Tokens of the first prompt of a training sequence (carry no loss)."""
    rollout_batches: list[int]
    """Episodes per ``HFPolicy.generate`` call, each measured."""
    rollout_context: int
    """Context tokens of each rollout request."""
    rollout_new_tokens: int
    """Tokens generated per request (the paper's max_new_tokens)."""
    dense_units: int
    """Vectors in the dense index."""
    dense_dim: int
    """Their dimension."""
    dense_queries: int
    """Queries per search batch."""
    dense_k: int
    """Hits per query (hybrid search's RRF depth)."""
    repeats: int
    """Timed repetitions after one warm-up."""


PAPER = Shapes(4, [2048, 8192], 768, [16, 64, 160], 1024, 512, 3_600_000, 768, 256, 50, 2)
DRY = Shapes(2, [48], 16, [3], 12, 6, 3000, 32, 8, 5, 1)


def model_config(dry_run: bool) -> Any:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(CONFIG))
    if dry_run:
        config.update(
            {
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "vocab_size": 512,
            }
        )
    return config


def byte_tokenizer() -> Any:
    """A byte-level tokenizer with Qwen2.5's three special tokens at ids 256-258."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars, extra = {}, 0
    for byte in range(256):  # GPT-2's byte-to-unicode map: id = byte value
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte], extra = chr(256 + extra), extra + 1
    inner = Tokenizer(models.BPE(vocab={chars[b]: b for b in range(256)}, merges=[]))
    inner.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    inner.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=inner)
    tokenizer.add_special_tokens(
        {"additional_special_tokens": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]}
    )
    tokenizer.pad_token, tokenizer.eos_token = "<|endoftext|>", "<|im_end|>"
    tokenizer.padding_side = "left"
    return tokenizer


def random_model(config: Any, dtype: torch.dtype, device: torch.device) -> Any:
    """Qwen2 of ``config`` with random weights, built directly on ``device``."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    with device:
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model


def peak_gib(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated(device) / 2**30, 2)


def held_gib(device: torch.device) -> float | None:
    """Memory still allocated: weights, gradients and optimizer state between steps."""
    if device.type != "cuda":
        return None
    return round(torch.cuda.memory_allocated(device) / 2**30, 2)


def reset_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: torch.device) -> float:
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


# ------------------------------------------------------------------ GRPO step


def completion_logprobs(model: Any, input_ids_BL: torch.Tensor, keep: int) -> torch.Tensor:
    """[B, keep-1] log-probabilities of the last keep-1 tokens, one row at a time (as TRL)."""
    logits_BKV = model(input_ids=input_ids_BL, logits_to_keep=keep).logits[:, :-1]
    targets_BK = input_ids_BL[:, -keep + 1 :]
    rows = []
    for logits_KV, targets_K in zip(logits_BKV, targets_BK, strict=True):
        logsumexp_K = torch.logsumexp(logits_KV.float(), dim=-1)
        chosen_K = logits_KV.gather(-1, targets_K[:, None]).squeeze(-1).float()
        rows.append(chosen_K - logsumexp_K)
    return torch.stack(rows)


def grpo_loss(
    logps_BK: torch.Tensor, ref_BK: torch.Tensor, advantages_B: torch.Tensor, mask_BK: torch.Tensor
) -> torch.Tensor:
    """TRL's grpo loss at num_iterations=1 (old = current, detached), epsilon 0.2, beta 0.001."""
    ratio_BK = torch.exp(logps_BK - logps_BK.detach())
    clipped_BK = torch.clamp(ratio_BK, 0.8, 1.2)
    policy_BK = -torch.min(ratio_BK * advantages_B[:, None], clipped_BK * advantages_B[:, None])
    delta_BK = ref_BK - logps_BK
    kl_BK = torch.exp(delta_BK) - delta_BK - 1
    per_token_BK = policy_BK + 0.001 * kl_BK
    return ((per_token_BK * mask_BK).sum(-1) / mask_BK.sum(-1).clamp(min=1)).mean()


def grpo_batch(config: Any, shapes: Shapes, seq_len: int, device: torch.device) -> dict:
    """Random ids, a loss mask (tool results 0, as in multi-turn trajectories), advantages."""
    generator = torch.Generator().manual_seed(seq_len)
    ids = torch.randint(0, config.vocab_size, (shapes.micro_batch, seq_len), generator=generator)
    keep = seq_len - shapes.prompt_len + 1
    mask = (torch.rand(shapes.micro_batch, keep - 1, generator=generator) < 0.6).float()
    advantages = torch.randn(shapes.micro_batch, generator=generator)
    return {
        "input_ids": ids.to(device),
        "mask": mask.to(device),
        "advantages": advantages.to(device),
        "keep": keep,
    }


def measure_step(
    model: Any, reference: Callable[[dict], torch.Tensor], optimizer: Any, batch: dict, shapes
) -> dict[str, float]:
    """Seconds of one micro-batch (reference, forward, backward) and of one optimizer step."""
    device = batch["input_ids"].device
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)

    def micro_batch() -> None:
        with torch.no_grad(), autocast:
            ref = reference(batch)
        with autocast:
            logps = completion_logprobs(model, batch["input_ids"], batch["keep"])
            loss = grpo_loss(logps, ref, batch["advantages"], batch["mask"])
        loss.backward()

    def optimizer_step() -> None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)

    micro_batch()  # warm-up, and the gradients' first allocation
    optimizer_step()  # allocates the optimizer state
    micro = [timed(micro_batch, device) for _ in range(shapes.repeats)]
    step = timed(optimizer_step, device)
    return {"micro_batch_s": round(min(micro), 3), "optimizer_step_s": round(step, 3)}


def grpo_phase(
    mode: str, config: Any, shapes: Shapes, device: torch.device, progress: Progress = None
) -> dict:
    """Full fine-tuning (fp32 master, bf16 autocast) or LoRA: per context length, time and
    memory; ``progress(result)`` after each length (a phase stopped at its cap keeps them)."""
    reset_memory(device)
    lora = mode == "lora"
    dtype_name = load_dtype_for_training(ModelConfig(dtype="bfloat16"), lora, sharded=False)
    model = random_model(config, getattr(torch, dtype_name), device)
    checkpointing = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.18 renamed it
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=checkpointing)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=checkpointing)
    model.config.use_cache = False
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(r=16, lora_alpha=32, target_modules=LORA_TARGETS, task_type="CAUSAL_LM"),
        )
        model.enable_input_require_grads()

        def reference(batch: dict) -> torch.Tensor:
            with model.disable_adapter():
                return completion_logprobs(model, batch["input_ids"], batch["keep"])
    else:
        frozen = random_model(config, torch.bfloat16, device).eval()

        def reference(batch: dict) -> torch.Tensor:
            return completion_logprobs(frozen, batch["input_ids"], batch["keep"])

    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    fused = {"fused": True} if device.type == "cuda" else {}
    optimizer = torch.optim.AdamW(trainable, lr=1e-6, weight_decay=0.0, **fused)
    result: dict[str, Any] = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "weights_dtype": dtype_name,
        "compute_dtype": "bfloat16 (autocast)",
        "trainable_parameters": sum(p.numel() for p in trainable),
        "by_seq_len": {},
    }
    for seq_len in shapes.seq_lens:
        try:
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            batch = grpo_batch(config, shapes, seq_len, device)
            timing = measure_step(model, reference, optimizer, batch, shapes)
            result["by_seq_len"][str(seq_len)] = {
                **timing,
                "peak_gib": peak_gib(device),
                "held_gib": held_gib(device),
            }
        except torch.cuda.OutOfMemoryError as error:
            result["by_seq_len"][str(seq_len)] = {"error": f"OutOfMemoryError: {error}"[:300]}
            optimizer.zero_grad(set_to_none=True)
            reset_memory(device)
        if progress is not None:
            progress(result)
    return result


# ------------------------------------------------------------------ rollout


def rollout_phase(
    config: Any, shapes: Shapes, device: torch.device, progress: Progress = None
) -> dict:
    """HFPolicy on a bf16 model: generated tokens per second and peak memory per batch size;
    ``progress(result)`` after each batch size."""
    reset_memory(device)
    model = random_model(config, torch.bfloat16, device).eval()
    tokenizer = byte_tokenizer()
    policy = HFPolicy(model, tokenizer)
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=shapes.rollout_new_tokens)
    generator = torch.Generator().manual_seed(1)
    results: dict[str, Any] = {"stop_ids": policy.stop_ids, "by_batch": {}}
    for batch in [1, *shapes.rollout_batches]:  # a batch of 1 warms the kernels up
        requests = [
            GenerationRequest(
                messages=[],
                token_ids=torch.randint(
                    0, 256, (shapes.rollout_context,), generator=generator
                ).tolist(),
                max_new_tokens=shapes.rollout_new_tokens,
                request_id=f"q#{row}",
            )
            for row in range(batch)
        ]
        reset_memory(device)
        sync(device)
        start = time.perf_counter()
        generations = policy.generate(requests, sampling)
        sync(device)
        seconds = time.perf_counter() - start
        errors = [g.error for g in generations if g.error]
        tokens = sum(len(g.token_ids or ()) for g in generations)
        results["by_batch"][str(batch)] = {
            "seconds": round(seconds, 3),
            "generated_tokens": tokens,
            "tokens_per_s": round(tokens / seconds, 1),
            "peak_gib": peak_gib(device),
            "errors": len(errors),
            "first_error": errors[0][:300] if errors else None,
        }
        if progress is not None:
            progress(results)
    return results


# ------------------------------------------------------------------ dense search


def cpu_topk(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[str, np.ndarray, float]:
    """Exact top-k on the CPU: FAISS IndexFlatIP when installed, else one NumPy matmul."""
    try:
        import faiss
    except ImportError:
        faiss = None
    if faiss is not None:
        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(vectors)
        start = time.perf_counter()
        _, ids = index.search(queries, k)
        return f"faiss {faiss.__version__} IndexFlatIP", ids, time.perf_counter() - start
    start = time.perf_counter()
    scores = queries @ vectors.T
    ids = np.argpartition(-scores, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, ids, axis=1), axis=1)
    ids = np.take_along_axis(ids, order, axis=1)
    return "numpy matmul (faiss not installed)", ids, time.perf_counter() - start


def dense_phase(shapes: Shapes, device: torch.device) -> dict:
    """Exact search of ``dense_queries`` queries over ``dense_units`` vectors, GPU and CPU."""
    reset_memory(device)
    generator = torch.Generator(device=device).manual_seed(2)
    vectors = torch.randn(shapes.dense_units, shapes.dense_dim, generator=generator, device=device)
    vectors = torch.nn.functional.normalize(vectors, dim=1)
    queries = torch.nn.functional.normalize(vectors[: shapes.dense_queries] + 0.1, dim=1)
    vectors_cpu, queries_cpu = vectors.cpu().numpy(), queries.cpu().numpy()
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    index, batch = vectors.to(dtype), queries.to(dtype)
    del vectors

    def search() -> torch.Tensor:
        return torch.topk(batch @ index.T, shapes.dense_k, dim=1).indices

    search()
    gpu_s = min(timed(search, device) for _ in range(max(shapes.repeats, 3)))
    gpu_ids = search().cpu().numpy()
    method, cpu_ids, cpu_s = cpu_topk(vectors_cpu, queries_cpu, shapes.dense_k)
    overlap = np.mean(
        [len(set(a) & set(b)) / shapes.dense_k for a, b in zip(gpu_ids, cpu_ids, strict=True)]
    )
    return {
        "gpu": {
            "method": f"torch matmul + topk ({str(dtype).removeprefix('torch.')})",
            "seconds_per_batch": gpu_s,  # unrounded: a dry run's batch takes microseconds
            "peak_gib": peak_gib(device),
        },
        "cpu": {"method": method, "seconds_per_batch": cpu_s, "cores": os.cpu_count()},
        "topk_overlap": round(float(overlap), 4),
        "speedup": round(cpu_s / gpu_s, 1) if gpu_s > 0 else None,
    }
