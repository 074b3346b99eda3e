"""One GPU check of the paper-scale path, under 6 minutes, the real trainer included: one JSON.

    python scripts/gpu_check.py --carry .carry/tok                       # here: files to carry
    PYTHONPATH=. python3 scripts/gpu_check.py --out $OUT/gpu_check.json \
        --policy-tokenizer .carry/tok/smollm2 --encoder-tokenizer .carry/tok/minilm
    python scripts/gpu_check.py --dry-run --out /tmp/gpu_check.json      # tiny shapes, CPU

Phases, most valuable first, each in a process of its own under its own time cap (the caps add
up to 350 s; ``--budget-s`` lowers the whole, ``--phases`` picks some); the JSON is written
before the first phase and rewritten after every one, and a phase stopped at its cap keeps what
it had measured. Stopped (Ctrl-C, ``kill``), the check ends the running phase and every process
it started, keeps what it had measured and says so under ``stopped``
(``grasp/bench/gpu_driver.py``):

- ``train.full`` (90 s), ``train.resume`` (45 s), ``train.lora`` (70 s): ``scripts/train.py``
  itself on the GPU (TRL's GRPOTrainer, transformers rollouts, the trainer's index built with
  the encoder on the GPU) with a random ~40M Qwen2 policy (SmolLM2's tokenizer) and a random
  2-layer BERT encoder, over 16 bundled HotpotQA train questions: 2 steps of full fine-tuning
  (fp32 master weights, bf16 autocast; rollouts under bf16 autocast), the same run relaunched
  for a third step (it must resume from its checkpoint), and 2 steps of LoRA. A scripted warm
  start first teaches the tool-call format, so that rewards differ within groups and the
  update is not a no-op. Per step: step, rollout and update seconds, peak GPU memory, reward
  spread (``frac_reward_zero_std``). ``grasp/bench/gpu_train.py``.
- ``grpo_step.full_fp32_master`` (40 s), ``grpo_step.lora`` (35 s): one GRPO micro-batch
  (forward, backward) and one optimizer step at Qwen2.5-3B's shape, the paper's per-device
  batch (4 sequences) and context lengths, full fine-tuning with fp32 master weights under bf16
  autocast and LoRA (r=16 on every linear layer, bf16 base): seconds and peak GPU memory. The
  loss is TRL's ``grpo`` loss written out, with the same tensor shapes; gradient checkpointing on.
- ``rollout_hf`` (45 s): ``HFPolicy`` (bf16) generating 512 tokens for batches of episodes at
  Qwen2.5-3B's shape: tokens/s and peak memory.
- ``dense_search`` (25 s): exact inner-product top-k over 3.6M unit vectors of 768 dimensions:
  torch on the GPU (fp16) against FAISS ``IndexFlatIP`` on the CPU, or NumPy without faiss.

The 3B model is built from ``configs/gpu_check/qwen2.5_3b_config.json`` with random weights:
nothing is downloaded. Its phases need torch and transformers, peft for LoRA.

What to carry to the GPU machine (it reaches no package index; it had Python 3.12, torch
2.11, transformers 5.17, accelerate, peft, sentence-transformers, numpy, scipy): the
checkout's code, the tokenizers (``--carry DIR`` writes them: 4.4 MB), and wheels of what the
training part needs beyond that, about 21 MB, fetched here with ``pip download --no-deps
--only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 --platform
manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .carry/whl`` trl==1.16.0
datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 hydra-core==1.3.8 omegaconf==2.3.1
bm25s==0.3.16 PyStemmer==3.1.0 faiss-cpu==1.15.1 datasketch==2.0.0, plus hydra's
antlr4-python3-runtime==4.9.3, an sdist only: ``pip wheel --no-deps --no-binary=:all:
antlr4-python3-runtime==4.9.3 -w .carry/whl``. There: ``pip install --no-index --no-deps
--target /tmp/site .carry/whl/*.whl`` and ``PYTHONPATH=/tmp/site:.``. Code, tokenizers and
wheels come to about 30 MB, under the 64 MiB a call carries; the repository's results are not
needed there.
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

from grasp.bench import gpu_driver  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    return gpu_driver.main(argv, description=__doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
