"""Config values that cannot work fail when the config is built, naming the field (issue 18, 5.12).

Each bad override is composed through the real Hydra configs into its dataclass, as the entry
point composes it: every config checks its fields in ``__post_init__``, so building it is the
check, before any file is read; the ValueError must name the field as the user typed it. The value lists that
mirror a library's own (TRL's loss types, transformers' schedulers, uvicorn's log levels,
bm25s's methods) are checked against the installed library.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hydra import compose, initialize_config_dir

from grasp.config import (
    LOG_LEVELS,
    BenchBuildConfig,
    BenchRetrievalConfig,
    BenchServeConfig,
    BridgeProbeConfig,
    BuildIndexConfig,
    EvalRetrievalConfig,
    EvaluateConfig,
    PrepareDataConfig,
    RobustnessConfig,
    ServeRetrievalConfig,
    register_configs,
    to_dataclass,
)
from grasp.corpus.bm25 import BM25_METHODS
from grasp.paths import REPO_ROOT
from grasp.train.config import LOSS_TYPES, LR_SCHEDULERS, SCALE_REWARDS, TrainConfig

register_configs()

SCHEMAS = {
    "evaluate": EvaluateConfig,
    "robustness": RobustnessConfig,
    "bridge_probe": BridgeProbeConfig,
    "train": TrainConfig,
    "build_index": BuildIndexConfig,
    "eval_retrieval": EvalRetrievalConfig,
    "prepare_data": PrepareDataConfig,
    "serve_retrieval": ServeRetrievalConfig,
    "bench_retrieval": BenchRetrievalConfig,
    "bench_build": BenchBuildConfig,
    "bench_serve": BenchServeConfig,
}
REQUIRED = {"prepare_data": ["dataset=hotpotqa", "out=x.jsonl"], "serve_retrieval": ["index_dir=x"]}


def build(name: str, *overrides: str):
    """Compose ``configs/<name>.yaml`` with ``overrides`` into its dataclass (which checks it)."""
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        cfg = compose(name, overrides=[*REQUIRED.get(name, []), *overrides])
        config = to_dataclass(cfg, SCHEMAS[name])
    return config


BAD = [
    ("evaluate", "env.max_query_chars=0", "env.max_query_chars"),
    ("evaluate", "env.max_observation_chars=-1", "env.max_observation_chars"),
    ("evaluate", "rollout.max_context_tokens=-1", "rollout.max_context_tokens"),
    ("evaluate", "rollout.group_size=0", "rollout.group_size"),
    ("evaluate", "rollout.sampling.max_new_tokens=0", "rollout.sampling.max_new_tokens"),
    ("evaluate", "rollout.sampling.temperature=-1", "rollout.sampling.temperature"),
    ("train", "rollout.sampling.max_new_tokens=0", "rollout.sampling.max_new_tokens"),
    ("evaluate", "policy.scripted_reads=-3", "policy.scripted_reads"),
    ("evaluate", "policy.max_batch_size=0", "policy.max_batch_size"),
    ("evaluate", "policy.max_concurrency=0", "policy.max_concurrency"),
    ("evaluate", "index.granularities=[]", "index.granularities"),
    ("evaluate", "index.granularities=[sentence,sentence]", "index.granularities"),
    ("build_index", "index.granularities=[word]", "index.granularities"),
    ("evaluate", "index.shard_size=0", "index.shard_size"),
    ("evaluate", "index.encoder.batch_size=0", "index.encoder.batch_size"),
    ("evaluate", "index.encoder.query_batch_size=0", "index.encoder.query_batch_size"),
    ("build_index", "index.encoder.device=tpu", "index.encoder.device"),
    ("build_index", "index.bm25.method=bm26", "index.bm25.method"),
    ("build_index", "index.bm25.stemmer=klingon", "index.bm25.stemmer"),
    ("build_index", "index.bm25.stopwords=klingon", "index.bm25.stopwords"),
    ("evaluate", "batch_questions=0", "batch_questions"),
    ("robustness", "batch_questions=0", "batch_questions"),
    ("robustness", "n=0", "n"),
    ("robustness", "rollout.group_size=0", "rollout.group_size"),
    ("robustness", "dataset.name=hotpot", "dataset.name"),
    ("bridge_probe", "k=0", "k"),
    ("bridge_probe", "n=-1", "n"),
    ("bridge_probe", "dataset.name=hotpot", "dataset.name"),
    ("evaluate", "n=0", "n"),
    ("evaluate", "show=-1", "show"),
    ("eval_retrieval", "n=0", "n"),
    ("eval_retrieval", "k=0", "k"),
    ("bench_retrieval", "k=0", "k"),
    ("bench_build", "k=0", "k"),
    ("bench_serve", "k=0", "k"),
    ("prepare_data", "n=0", "n"),
    ("train", "grpo.beta=-1", "grpo.beta"),
    ("train", "grpo.learning_rate=-1e-4", "grpo.learning_rate"),
    ("train", "grpo.warmup_steps=-1", "grpo.warmup_steps"),
    ("train", "grpo.loss_type=ppo", "grpo.loss_type"),
    ("train", "grpo.lr_scheduler_type=cosin", "grpo.lr_scheduler_type"),
    ("train", "grpo.lr_scheduler_type=reduce_lr_on_plateau", "grpo.lr_scheduler_type"),
    ("train", "grpo.scale_rewards=std", "grpo.scale_rewards"),
    ("train", "save_every=0", "save_every"),
    ("train", "grpo.num_generations=1", "grpo.num_generations"),
    ("train", "grpo.questions_per_step=0", "grpo.questions_per_step"),
    ("train", "grpo.max_steps=0", "grpo.max_steps"),
    ("train", "grpo.vllm_importance_sampling_mode=per_token", "grpo.vllm_importance_sampling_mode"),
    ("train", "rollout.sampling.temperature=0", "rollout.sampling.temperature"),
    ("train", "eval_max_batch_size=0", "eval_max_batch_size"),
    ("evaluate", "env.tools=[semantic_search]", "env.tools"),
    ("evaluate", "env.tools=[answer]", "env.tools"),
    ("evaluate", "judge=openai judge.base_url=", "judge.kind"),
    ("train", "eval_questions=0", "eval_questions"),
    ("train", "trajectories_every=-1", "trajectories_every"),
    ("train", "experiment=cpu_grasp save_every=0", "save_every"),
    ("train", "grpo.dynamic_sampling.max_rounds=0", "grpo.dynamic_sampling.max_rounds"),
    ("serve_retrieval", "log_level=loud", "log_level"),
    ("serve_retrieval", "port=70000", "port"),
    ("serve_retrieval", "port=0", "port"),
    ("serve_retrieval", "keep_alive_s=-1", "keep_alive_s"),
    ("serve_retrieval", "service.max_k=0", "service.max_k"),
    ("bench_serve", "service.max_wait_ms=-1", "service.max_wait_ms"),
]


@pytest.mark.parametrize(
    ("name", "overrides", "field_name"), BAD, ids=[f"{name}:{o}" for name, o, _ in BAD]
)
def test_a_bad_value_fails_at_config_time_naming_its_field(name, overrides, field_name):
    # The whole dotted name, then "=" or " must": "n" must not match inside "index.shard_size".
    named = rf"(^|\s){re.escape(field_name)}(=| must)"
    with pytest.raises(ValueError, match=named):
        build(name, *overrides.split())


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_the_defaults_still_compose(name):
    build(name)


@pytest.mark.parametrize(
    "overrides",
    [
        ["rollout.sampling.temperature=0"],
        ["policy.max_batch_size=null", "policy.scripted_reads=0"],
        ["index.granularities=[paragraph]", "index.bm25.stemmer=", "index.bm25.stopwords="],
        ["index.encoder.device=cuda:1", "index.bm25.method=bm25+", "index.bm25.stopwords=de"],
    ],
    ids=lambda o: " ".join(o),
)
def test_edge_values_that_work_are_accepted(overrides):
    build("evaluate", *overrides)


def test_log_level_is_matched_in_any_case_as_uvicorn_does():
    assert build("serve_retrieval", "log_level=WARNING").log_level == "WARNING"


def test_top_k_beyond_the_corpus_fails_before_the_index_build(tmp_path, tiny_questions):
    from grasp.data import write_normalized
    from grasp.eval.protocol import evaluate_datasets
    from grasp.types import DatasetName

    path = tmp_path / "hotpotqa.jsonl"
    write_normalized([replace(q, dataset=DatasetName.HOTPOTQA) for q in tiny_questions], path)
    index_root = tmp_path / "indexes"
    config = build(
        "evaluate",
        "dataset=hotpotqa",
        f"dataset.path={path}",
        f"index_root={index_root}",
        f"out={tmp_path / 'out'}",
        "env.top_k=100000",
    )
    with pytest.raises(ValueError, match=r"env\.top_k=100000 exceeds the sentences"):
        evaluate_datasets(config)
    assert not index_root.exists() and not (tmp_path / "out").exists()


def test_value_lists_match_the_installed_libraries():
    import uvicorn.config
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer
    from transformers.trainer_utils import SchedulerType
    from trl import GRPOConfig

    assert LOG_LEVELS == tuple(uvicorn.config.LOG_LEVELS)
    for method in BM25_METHODS:
        _select_tfc_scorer(method)  # raises when bm25s does not know it
        _select_idf_scorer(method)
    assert set(LR_SCHEDULERS) <= {s.value for s in SchedulerType}
    fields = GRPOConfig.__dataclass_fields__
    loss_help = fields["loss_type"].metadata["help"]
    supported = re.search(r"Supported values are (.*?)\. ", loss_help).group(1)
    assert tuple(re.findall(r"'(\w+)'", supported)) == LOSS_TYPES
    for scaling in SCALE_REWARDS:
        assert f"'{scaling}'" in fields["scale_rewards"].metadata["help"].replace("`", "'")
