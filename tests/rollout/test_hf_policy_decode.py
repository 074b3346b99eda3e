"""HFPolicy's decoding loop (``decoder="loop"``, grasp/rollout/hf_decode.py) against the former
path (``decoder="generate"``: ``generate``'s loop with ``ChosenLogprobs``).

On a tiny random Llama (SmolLM2's tokenizer, 2 layers, 64 wide) in float32 both must give the
same ids and bit-identical log-probabilities, greedy and sampled (the loop draws the same random
numbers), with prompts of different lengths in a batch, rows that stop early, whole batches
that stop before their limit (the random stream continues into the next micro-batch), per
request limits and continued KV caches. And the loop's memory: no [rows, vocabulary] tensor
alive while the model runs, the KV cache allocated once per call.
"""

from __future__ import annotations

import contextlib
import gc

import pytest
import torch

from grasp.rollout import hf_policy
from grasp.rollout.hf_decode import LoopDecoder, preallocated_layer_class
from grasp.rollout.hf_policy import HFPolicy
from grasp.rollout.policy import GenerationRequest, SamplingConfig

STEPS = 12
SAMPLINGS = [
    SamplingConfig(temperature=0.0, max_new_tokens=STEPS),
    SamplingConfig(temperature=1.0, max_new_tokens=STEPS, seed=3),
    SamplingConfig(temperature=0.7, top_p=0.9, max_new_tokens=STEPS, seed=5),
]
SAMPLING_IDS = ["greedy", "sampled", "tempered-nucleus"]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    """The tiny random Llama (tests/conftest.py) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    return model, tokenizer


@pytest.fixture
def stops_often(tiny):
    """A context manager: the tiny model with its end-of-turn logit raised so that a row
    sampled at ``temperature`` stops with probability ~0.2 per step (its other logits are near
    0: e^9.5 is about a fifth of the 49k-token vocabulary's e^0)."""
    model, tokenizer = tiny
    end_of_turn = HFPolicy(model, tokenizer).end_of_turn_id

    @contextlib.contextmanager
    def raised(temperature: float):
        def raise_end_of_turn(module, args, logits):
            logits = logits.clone()
            logits[..., end_of_turn] += 9.5 * (temperature or 1.0)
            return logits

        handle = model.lm_head.register_forward_hook(raise_end_of_turn)
        try:
            yield model, tokenizer
        finally:
            handle.remove()

    return raised


def requests(tokenizer, limits=(STEPS,) * 5) -> list[GenerationRequest]:
    """Five prompts of different lengths (left padding inside every batch)."""
    texts = (
        "Who wrote Hamlet?",
        "Where was Hillary born? Answer briefly, please, in one sentence.",
        "Hi",
        "Name a river in Africa and the country it ends in.",
        "Why?",
    )
    ids = [tokenizer(t, add_special_tokens=False).input_ids for t in texts]
    assert len({len(i) for i in ids}) == len(ids)
    return [
        GenerationRequest([], i, limit, f"q{n}")
        for n, (i, limit) in enumerate(zip(ids, limits, strict=True))
    ]


@pytest.fixture(params=[False, True], ids=["checked", "deferred"])
def stop_check(request, monkeypatch):
    """The loop reading "every row stopped" before the next forward (the CPU's default) or
    after it (CUDA's default, forced here: the forward queued meanwhile is discarded)."""
    deferred = request.param
    monkeypatch.setattr(
        hf_policy, "LoopDecoder", lambda timer=None: LoopDecoder(timer, defer_stop_check=deferred)
    )
    return deferred


def both(model, tokenizer, batch, sampling, **kwargs):
    old = HFPolicy(model, tokenizer, decoder="generate", **kwargs).generate(batch, sampling)
    new = HFPolicy(model, tokenizer, decoder="loop", **kwargs).generate(batch, sampling)
    return old, new


def assert_same(old, new) -> None:
    for before, after in zip(old, new, strict=True):
        assert before.error is None and after.error is None
        assert after.token_ids == before.token_ids
        assert after.logprobs == before.logprobs  # bit-identical, not approximately
        assert after.finished == before.finished
        assert after.text == before.text


@pytest.mark.parametrize("max_batch_size", [None, 2], ids=["one-batch", "micro-batches"])
@pytest.mark.parametrize("sampling", SAMPLINGS, ids=SAMPLING_IDS)
def test_the_loop_generates_what_generate_does(tiny, sampling, max_batch_size) -> None:
    model, tokenizer = tiny
    old, new = both(model, tokenizer, requests(tokenizer), sampling, max_batch_size=max_batch_size)
    assert_same(old, new)
    assert all(len(g.token_ids or ()) == STEPS for g in new)  # the random model rarely stops


@pytest.mark.parametrize("max_batch_size", [None, 2], ids=["one-batch", "micro-batches"])
@pytest.mark.parametrize("sampling", SAMPLINGS[1:], ids=SAMPLING_IDS[1:])
def test_rows_and_batches_that_stop_early(
    stops_often, sampling, max_batch_size, stop_check
) -> None:
    """Stopped rows continue with padding until their batch stops; a batch whose rows all
    stopped before the limit ends there, and the next micro-batch draws the random numbers
    ``generate`` would have given it."""
    with stops_often(sampling.temperature) as (model, tokenizer):
        old, new = both(
            model, tokenizer, requests(tokenizer), sampling, max_batch_size=max_batch_size
        )
    assert_same(old, new)
    lengths = [len(g.token_ids or ()) for g in new]
    assert all(g.finished for g in new) and max(lengths) < STEPS, lengths
    assert len(set(lengths)) > 1, "rows should stop at different steps"


def test_greedy_rows_stop_at_once(stops_often, stop_check) -> None:
    with stops_often(2.0) as (model, tokenizer):
        old, new = both(model, tokenizer, requests(tokenizer), SAMPLINGS[0])
    assert_same(old, new)
    assert all(g.finished for g in new)


@pytest.mark.parametrize("sampling", SAMPLINGS[:2], ids=SAMPLING_IDS[:2])
def test_each_request_is_cut_at_its_own_limit(tiny, sampling) -> None:
    model, tokenizer = tiny
    limits = (3, 12, 1, 7, 5)
    old, new = both(model, tokenizer, requests(tokenizer, limits), sampling)
    assert_same(old, new)
    assert [len(g.token_ids or ()) for g in new] == list(limits)


@pytest.mark.parametrize("sampling", SAMPLINGS[:2], ids=SAMPLING_IDS[:2])
def test_continued_caches_generate_what_generate_does(
    tiny, stops_often, sampling, stop_check
) -> None:
    """Three turns with ``reuse_cache``: each request the last one, its generated ids and an
    observation; rows drop out and change order, and stop before the limit (a deferred check
    crops the cache of the discarded forward). Both decoders continue the same caches."""
    model, tokenizer = tiny
    observation = tokenizer("Observation: none.", add_special_tokens=False).input_ids

    def play(decoder: str, reuse_cache: bool = True):
        policy = HFPolicy(model, tokenizer, reuse_cache=reuse_cache, decoder=decoder)
        contexts = {r.request_id: list(r.token_ids or ()) for r in requests(tokenizer)}
        played = []
        for turn, keep in enumerate(([0, 1, 2, 3, 4], [4, 2, 0, 1], [1, 0])):
            batch = [GenerationRequest([], contexts[f"q{i}"], 6, f"q{i}") for i in keep]
            turn_sampling = SamplingConfig(
                sampling.temperature, sampling.top_p, 6, seed=sampling.seed + turn
            )
            with stops_often(sampling.temperature):
                generations = policy.generate(batch, turn_sampling)
            played.append(generations)
            for request, generation in zip(batch, generations, strict=True):
                contexts[request.request_id] += (generation.token_ids or []) + observation
        return played, policy.prefilled_tokens

    old, old_prefilled = play("generate")
    new, new_prefilled = play("loop")
    for old_turn, new_turn in zip(old, new, strict=True):
        assert_same(old_turn, new_turn)
    lengths = [len(g.token_ids or ()) for turn in new for g in turn]
    assert min(lengths) < 6, "some rows should stop before the limit"
    assert new_prefilled == old_prefilled
    _, full_prefilled = play("loop", reuse_cache=False)
    assert new_prefilled < full_prefilled, "later turns should prefill only what was appended"


def test_a_step_keeps_no_vocabulary_sized_tensor_while_the_model_runs(tiny) -> None:
    """Before each decoding forward, no tensor of [rows, vocabulary] is alive (the loop drops
    the step's scores, softmax and log-softmax); ``generate``'s loop, the control, keeps some."""
    model, tokenizer = tiny
    batch = requests(tokenizer)
    vocabulary = model.get_input_embeddings().num_embeddings

    def alive_per_forward(decoder: str) -> list[int]:
        counts: list[int] = []

        def count(module, args, kwargs):
            gc.collect()
            counts.append(
                sum(
                    1
                    for o in gc.get_objects()
                    if type(o) is torch.Tensor
                    and o.dim() >= 2
                    and o.shape[0] == len(batch)
                    and o.shape[-1] == vocabulary
                )
            )

        handle = model.register_forward_pre_hook(count, with_kwargs=True)
        try:
            generations = HFPolicy(model, tokenizer, decoder=decoder).generate(batch, SAMPLINGS[2])
        finally:
            handle.remove()
        assert all(len(g.logprobs or ()) == len(g.token_ids or ()) for g in generations)
        return counts[1:]  # the decoding forwards

    loop = alive_per_forward("loop")
    assert len(loop) == STEPS - 1 and set(loop) == {0}, loop
    assert min(alive_per_forward("generate")) >= 1, "the control should see the step's scores"


def test_the_kv_cache_is_allocated_once_per_call(tiny) -> None:
    """Every forward of a call writes into the same key and value buffers, sized for the
    context and every new id; attention sees views of their filled part."""
    model, tokenizer = tiny
    batch = requests(tokenizer)
    layer_class = preallocated_layer_class()
    seen: list[tuple[list[int], list[int], list[int]]] = []

    def record(module, args, kwargs, output):
        layers = kwargs["cache"].layers
        assert all(isinstance(layer, layer_class) for layer in layers)
        seen.append(
            (
                [layer.key_buffer.data_ptr() for layer in layers],
                [layer.keys.data_ptr() for layer in layers],
                [layer.key_buffer.shape[2] for layer in layers],
            )
        )

    handle = model.register_forward_hook(record, with_kwargs=True)
    try:
        HFPolicy(model, tokenizer, decoder="loop").generate(batch, SAMPLINGS[1])
    finally:
        handle.remove()
    width = max(len(r.token_ids or ()) for r in batch)
    assert len(seen) == STEPS
    buffers, views, capacities = zip(*seen, strict=True)
    assert len(set(map(tuple, buffers))) == 1, "a buffer was re-allocated during the call"
    assert all(view == buffer for view, buffer in zip(views, buffers, strict=True))
    assert set(map(tuple, capacities)) == {(width + STEPS,) * len(capacities[0])}


def test_the_decoder_is_validated(tiny) -> None:
    model, tokenizer = tiny
    assert HFPolicy(model, tokenizer).decoder == "loop"
    with pytest.raises(ValueError, match="decoder must be one of"):
        HFPolicy(model, tokenizer, decoder="static")
