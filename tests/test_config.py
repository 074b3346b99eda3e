"""Configs: every field documented, every YAML composes into its dataclass, typos fail."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from grasp.config import (
    BridgeProbeConfig,
    BuildIndexConfig,
    DatasetConfig,
    EvalRetrievalConfig,
    EvaluateConfig,
    RobustnessConfig,
    dataset_path,
    default_index_dir,
    register_configs,
    to_dataclass,
)
from grasp.paths import REPO_ROOT
from grasp.train.config import TrainConfig

CONFIG_DIR = str(REPO_ROOT / "configs")
register_configs()


def config_classes():
    for path in sorted((REPO_ROOT / "grasp").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Config", "Settings")):
                yield path, node


@pytest.mark.parametrize(
    ("path", "node"), list(config_classes()), ids=lambda x: getattr(x, "name", "")
)
def test_every_config_field_has_a_docstring(path: Path, node: ast.ClassDef):
    body = node.body
    undocumented = []
    for i, item in enumerate(body):
        if isinstance(item, ast.AnnAssign):
            following = body[i + 1] if i + 1 < len(body) else None
            documented = (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            )
            if not documented:
                undocumented.append(item.target.id)
    assert undocumented == [], f"{path.name}:{node.name} fields without a docstring"


def compose_as(name: str, schema, overrides: list[str]):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return to_dataclass(compose(name, overrides=overrides), schema)


EXPERIMENTS = sorted(p.stem for p in (REPO_ROOT / "configs" / "experiment").glob("*.yaml"))
ABLATIONS = sorted(p.stem for p in (REPO_ROOT / "configs" / "ablation").glob("*.yaml"))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_and_validates(experiment):
    from grasp.train.setup import validate_config

    config = compose_as("train", TrainConfig, [f"experiment={experiment}"])
    assert config.experiment == experiment
    if config.model.name.startswith("wheel:"):
        validate_config(config)  # hub models cannot be checked offline; env and judge were


@pytest.mark.parametrize("ablation", ABLATIONS)
def test_every_ablation_applies_to_the_smoke_run(ablation):
    config = compose_as("train", TrainConfig, [f"ablation={ablation}"])  # checks env
    if ablation != "none":
        assert config.run_dir == f"runs/cpu_smoke-{ablation}"
    if ablation == "no_read":
        assert "read_paragraph" not in config.env.tools
    if ablation == "no_rr":
        assert config.rollout.reward.alpha == 0.0


def test_paper_run_settings():
    config = compose_as("train", TrainConfig, ["experiment=grasp_qwen2.5_3b"])
    assert config.model.name == "Qwen/Qwen2.5-3B-Instruct"
    assert (config.env.top_k, config.grpo.questions_per_step, config.grpo.max_steps) == (5, 64, 270)
    assert config.train_source == "hub" and config.index.encoder.device == "cuda"
    assert not config.rollout.assistant_prefix and not config.env.demonstration


@pytest.mark.parametrize("policy", ["scripted", "hf", "openai", "qwen2.5_3b_hf", "qwen2.5_3b_vllm"])
def test_every_policy_composes(policy):
    config = compose_as("evaluate", EvaluateConfig, [f"policy={policy}"])
    assert config.policy.kind in {"scripted", "hf", "openai", "vllm"}


@pytest.mark.parametrize(
    ("name", "schema"), [("robustness", RobustnessConfig), ("bridge_probe", BridgeProbeConfig)]
)
def test_one_dataset_is_chosen_by_its_config_group(name, schema):
    assert compose_as(name, schema, []).dataset.name == "hotpotqa"
    chosen = compose_as(name, schema, ["dataset=musique", "dataset.path=/elsewhere.jsonl"])
    assert (chosen.dataset.name, chosen.dataset.path) == ("musique", "/elsewhere.jsonl")


@pytest.mark.parametrize("judge", ["none", "openai", "hf"])
def test_every_judge_composes_with_the_versioned_prompt(judge):
    config = compose_as("evaluate", EvaluateConfig, [f"judge={judge}"])
    assert config.judge.kind == judge and config.judge.prompt.version == "v1"


@pytest.mark.parametrize("dataset", ["hotpotqa", "2wikimultihopqa", "musique"])
def test_build_index_config_per_dataset(dataset):
    config = compose_as("build_index", BuildIndexConfig, [f"dataset={dataset}"])
    assert config.dataset.name == dataset
    assert compose_as("eval_retrieval", EvalRetrievalConfig, []).datasets[2] == "musique"


@pytest.mark.parametrize(
    ("name", "schema", "override", "message"),
    [
        ("build_index", BuildIndexConfig, "dataset.name=hotpot", "dataset.name='hotpot'"),
        ("build_index", BuildIndexConfig, "index.dense.factry=HNSW32", "factry"),
        ("evaluate", EvaluateConfig, "env.tools=[semantic_search,teleport]", "teleport"),
        ("evaluate", EvaluateConfig, "policy.kind=gpt", "policy.kind"),
        ("evaluate", EvaluateConfig, "datasets=[hotpotqa,hotpot]", "datasets='hotpot'"),
        ("evaluate", EvaluateConfig, "judge.kind=gpt", "judge.kind"),
        ("train", TrainConfig, "model.chat_template=llama", "model.chat_template"),
    ],
)
def test_config_typos_fail_with_the_field_named(name, schema, override, message):
    with pytest.raises(Exception, match=message.replace("[", r"\[").replace(".", r"\.")):
        compose_as(name, schema, [override])


def test_the_data_and_index_folders_are_defined_once_with_an_optional_root(tmp_path) -> None:
    from grasp.data import default_normalized_path

    assert default_index_dir("musique", "dev") == REPO_ROOT / "indexes" / "musique-dev"
    assert default_index_dir("musique", "dev", str(tmp_path)) == tmp_path / "musique-dev"
    assert default_normalized_path("musique", "dev", tmp_path) == tmp_path / "musique" / "dev.jsonl"
    assert dataset_path(DatasetConfig(name="musique"), "dev") == default_normalized_path("musique")
    config = EvaluateConfig(datasets=["hotpotqa", "musique"], data_dir=str(tmp_path))
    assert [c.path for c in config.dataset_configs()] == [
        str(tmp_path / name / "dev.jsonl") for name in ("hotpotqa", "musique")
    ]


def test_a_dataset_config_reads_its_path_else_the_normalized_file(tmp_path, tiny_questions):
    from grasp.data import write_normalized
    from grasp.data.config import read_questions

    file = write_normalized(list(tiny_questions), tmp_path / "hotpotqa" / "train.jsonl")
    by_root = read_questions(DatasetConfig(name="hotpotqa"), "train", data_dir=tmp_path)
    by_path = read_questions(DatasetConfig(name="hotpotqa", path=str(file)), "train")
    assert by_root[1] == by_path[1] == file
    assert [q.question_id for q in by_root[0]] == [q.question_id for q in tiny_questions]
    assert by_path[0] == by_root[0]
    with pytest.raises(FileNotFoundError, match="musique"):
        read_questions(DatasetConfig(name="musique"), "train", data_dir=tmp_path)
