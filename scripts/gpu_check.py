"""One GPU check of the paper-scale path, on a randomly initialised Qwen2.5-3B: writes one JSON.

    PYTHONPATH=. python3 scripts/gpu_check.py --out $OUT/gpu_check.json   # one GPU, < 8 min
    python scripts/gpu_check.py --dry-run --out /tmp/gpu_check.json      # tiny shapes, CPU, s

What it measures, each phase on its own (an out-of-memory error or a missing package becomes
that phase's ``error`` in the JSON, and the JSON is rewritten after every phase):

- ``grpo_step``: one GRPO micro-batch (forward, backward) and one optimizer step at the paper's
  per-device batch (4 sequences, ``a100x2``/``h100x8``) and context lengths, for full
  fine-tuning with fp32 master weights under bf16 autocast (``grasp.models.
  load_dtype_for_training``) and for LoRA (r=16 on every linear layer, bf16 base): seconds and
  peak GPU memory. The loss is TRL's ``grpo`` loss written out (clipped ratio times advantage
  over masked completion tokens, plus beta times the k3 KL to a frozen reference), with the same
  tensor shapes; gradient checkpointing is on, as in ``grasp_qwen2.5_3b``.
- ``rollout_hf``: ``HFPolicy`` (the transformers backend, bf16) generating 512 tokens for
  batches of episodes: tokens/s and peak memory (its scores grow as rows x tokens x vocabulary).
- ``dense_search``: exact inner-product top-k over 3.6M unit vectors of 768 dimensions (the
  pooled HotpotQA train sentences under e5-base-v2): torch on the GPU (fp16) against FAISS
  ``IndexFlatIP`` on the CPU, or NumPy when faiss is absent; with the top-k overlap.

The model is built from ``configs/gpu_check/qwen2.5_3b_config.json`` (Qwen2.5-3B-Instruct's
published config) with random weights: nothing is downloaded. The tokenizer is byte-level,
built here (0 bytes to carry; SmolLM2's tokenizer files are 3.4 MB): only lengths matter
with random weights, so prompts are random token ids of the stated lengths.

Needs torch and transformers (any 5.x), numpy and tokenizers; peft for the LoRA phase (the
phase records the ImportError without it). It does not need trl, datasets, bm25s, vllm or
faiss. On the H200 machine (Python 3.12, torch 2.11, transformers 5.17, peft) nothing has to be
carried. For the FAISS baseline on its CPU, carry faiss-cpu (18 MB, abi3; it needs only numpy
and packaging, both there): ``pip download --no-deps --only-binary=:all: --python-version 3.12
--platform manylinux_2_28_x86_64 -d .whl faiss-cpu==1.15.1`` here, and on the machine
``pip install --no-deps --target /tmp/site .whl/*.whl`` with ``PYTHONPATH=/tmp/site:.``.
The check lives in ``grasp/bench/gpu.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grasp.startup import process_environment  # noqa: E402

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which
# then preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

from grasp.bench import gpu  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    return gpu.main(argv, description=__doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
