"""configs/baseline/*.yaml compose into EvaluateConfig; the policy is built in one place."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from grasp.baselines import BaselinePolicy, build_baseline_policy
from grasp.baselines.config import BaselineConfig
from grasp.config import EvaluateConfig, register_configs, to_dataclass
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.paths import REPO_ROOT
from grasp.rollout.factory import PolicyConfig
from grasp.rollout.openai_policy import OpenAIChatPolicy
from grasp.rollout.scripted import HeuristicSearchPolicy

register_configs()
BASELINES = sorted(p.stem for p in (REPO_ROOT / "configs" / "baseline").glob("*.yaml"))
PARAGRAPH_TOOLS = ["semantic_search", "keyword_search", "answer"]


def evaluate_config(*overrides: str) -> EvaluateConfig:
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        return to_dataclass(compose("evaluate", overrides=list(overrides)), EvaluateConfig)


EXPECTED = {
    "none": ("none", None),
    "search_r1": ("none", ["search", "answer"]),
    "direct": ("direct", None),
    "single_step_semantic": ("single_step", None),
    "single_step_lexical": ("single_step", None),
    "single_step_hybrid": ("single_step", None),
    "single_step_paragraph": ("single_step", PARAGRAPH_TOOLS),
    "single_step_rerank": ("single_step", None),
    "ircot": ("ircot", PARAGRAPH_TOOLS),
    "crag": ("crag", PARAGRAPH_TOOLS),
    "adaptive": ("adaptive", PARAGRAPH_TOOLS),
    "self_rag": ("self_rag", PARAGRAPH_TOOLS),
    "adaptive_self_rag": ("adaptive_self_rag", PARAGRAPH_TOOLS),
}


def test_every_baseline_file_is_listed():
    assert sorted(EXPECTED) == BASELINES


@pytest.mark.parametrize("name", BASELINES)
def test_every_baseline_composes(name):
    overrides = [f"baseline={name}", "policy=hf"]
    if name == "single_step_rerank":
        overrides.append("baseline.reranker.path=/models/reranker")
    config = evaluate_config(*overrides)
    kind, tools = EXPECTED[name]
    assert config.baseline.kind == kind
    assert config.env.tools == (tools or EnvConfig().tools)
    if name.startswith("single_step_") and name != "single_step_paragraph":
        assert config.baseline.search == name.removeprefix("single_step_").replace(
            "rerank", "semantic"
        )
    if name == "single_step_rerank":
        assert (config.env.top_k, config.baseline.context_k) == (20, 5)
        assert (
            config.baseline.reranker.enabled and config.baseline.reranker.path == "/models/reranker"
        )


def test_the_default_is_no_baseline_and_the_reranker_path_is_required():
    assert evaluate_config().baseline == BaselineConfig()
    with pytest.raises(Exception, match="baseline.reranker.enabled needs baseline.reranker.path"):
        evaluate_config("baseline=single_step_rerank")
    with pytest.raises(Exception, match="baseline.kind"):
        evaluate_config("baseline.kind=rag")


def test_build_wraps_the_backend_only_for_a_baseline(tiny_index):
    env = RetrievalEnvironment(tiny_index, EnvConfig())
    plain = build_baseline_policy(BaselineConfig(), PolicyConfig(kind="scripted"), env)
    assert isinstance(plain.policy, HeuristicSearchPolicy)
    served = PolicyConfig(kind="openai", base_url="http://127.0.0.1:9/v1", served_model="m")
    assert build_baseline_policy(BaselineConfig(), served, env).policy.tools == env.tool_schemas
    built = build_baseline_policy(BaselineConfig(kind="ircot"), served, env)
    assert isinstance(built.policy, BaselinePolicy) and built.chat is None
    backend = built.policy.backend.policy
    assert isinstance(backend, OpenAIChatPolicy) and backend.tools == []
    with pytest.raises(ValueError, match="needs a language model as its backend"):
        build_baseline_policy(BaselineConfig(kind="direct"), PolicyConfig(kind="scripted"), env)
