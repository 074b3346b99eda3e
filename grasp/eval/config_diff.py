"""What differs between a configuration and the one an earlier run or evaluation recorded.

Resuming an evaluation folder (grasp/eval/policy_eval.py), resuming a training run
(grasp/train/trainer.py) and re-evaluating a baseline row (grasp/experiments/baseline_table.py)
all compare the resolved configuration with the recorded ``config.json``: key by key, as they
read back from JSON, forgiving a key added since when its value cannot have changed the result
(``predates``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """A nested configuration as {dotted key: leaf value}."""
    if not isinstance(tree, dict):
        return {prefix[:-1]: tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        flat.update(flatten(value, f"{prefix}{key}."))
    return flat


def config_differences(config: Mapping[str, Any], reference: Mapping[str, Any]) -> list[str]:
    """Keys (dotted) whose values differ between two resolved configurations, as they read
    once written to JSON (enums as their values, tuples as lists)."""
    a, b = flatten(as_json(config)), flatten(as_json(reference))
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def predates(key: str, resolved: Mapping[str, Any]) -> bool:
    """True when an evaluation recorded before ``key`` existed ran as ``resolved`` would: the
    field is one whose value cannot have changed that evaluation's trajectories. A field
    added since that can change them is a difference: a baseline is evaluated again
    (grasp/experiments/baseline_table.py), a folder is not resumed (``check_or_write_config``)."""
    if key.startswith("index.fusion."):
        # The index's fused search serves scripts/eval_retrieval.py only: no policy calls it
        # (single_step_hybrid fuses the environment's two searches itself).
        return True
    if key.startswith(("baseline.self_rag.", "baseline.index_router.")):
        # Read by the self_rag and adaptive_self_rag policies only.
        kind = resolved.get("baseline", {}).get("kind")
        return kind not in ("self_rag", "adaptive_self_rag")
    if key == "policy.adapters":
        return not resolved.get("policy", {}).get("adapters")
    if key == "stage":  # read with run_dir only
        return resolved.get("run_dir") is None
    if key == "rollout.reward.retrieval_needs_answer":  # False is the reward as it was
        return not resolved.get("rollout", {}).get("reward", {}).get("retrieval_needs_answer")
    if key == "env.citations":  # off: answer's schema and the prompts as they were
        return not resolved.get("env", {}).get("citations")
    if key == "rollout.max_episode_seconds":  # 0 is no wall-clock budget, as it was
        return not resolved.get("rollout", {}).get("max_episode_seconds")
    if key == "warm_start.adapt_plans":  # off: the plans as written, as they were played
        return not resolved.get("warm_start", {}).get("adapt_plans")
    if key in ("policy.reuse_cache", "grpo.reuse_cache"):  # off: every turn prefilled whole
        section = key.split(".")[0]
        return not resolved.get(section, {}).get("reuse_cache")
    if key.startswith("index.near_duplicates."):  # off (threshold 0) is the index as it was
        return not resolved.get("index", {}).get("near_duplicates", {}).get("threshold")
    env = resolved.get("env", {})
    if key == "env.hit_labels":  # ids: the hit labels and read_paragraph's argument as they were
        return env.get("hit_labels", "ids") == "ids"
    if key == "env.repair_calls":  # off: every call parsed strictly, as it was
        return not env.get("repair_calls")
    reward = resolved.get("rollout", {}).get("reward", {})
    if key == "rollout.reward.no_answer_penalty":  # 0: no R_N, the reward as it was
        return not reward.get("no_answer_penalty")
    if key in ("rollout.reward.search_gain", "rollout.reward.search_cost"):  # 0: as it was
        return not reward.get(key.rsplit(".", 1)[1])
    if key == "rollout.reward.free_searches":  # read by R_C only
        return not reward.get("search_cost")
    if key == "env.question_quotes":  # as written: the question's prompt as it was
        return env.get("question_quotes", "as_written") == "as_written"
    grpo = resolved.get("grpo", {})
    if key in ("grpo.loss_logprobs", "grpo.logprob_chunk"):
        return True  # how the loss is computed: no evaluation's trajectories depend on it
    if key == "grpo.rollout_native_gqa":
        return True  # the same attention numbers, computed without copying key/value heads
    if key == "grpo.rollout_weights":  # adapters: the trained model unmerged, as it was
        return grpo.get("rollout_weights", "adapters") == "adapters"
    return False


def as_json(tree: Any) -> Any:
    """``tree`` as it reads back from the JSON a script writes (``default=str``)."""
    return json.loads(json.dumps(tree, default=str))
