"""Multi-GPU launch plans: which GPUs train, which serve vLLM, where retrieval runs.

A plan (``configs/launch/*.yaml``) is checked on any machine, GPU or not, and turned into
the shell commands that start the run: the retrieval service, the vLLM server when rollouts
run on their own GPUs, and ``accelerate launch`` of the trainer. ``scripts/launch.py`` prints
them; ``validate_plan`` fails, naming the field, on a plan that could not work: an unknown
accelerate key, a GPU used twice, a step batch that does not split over the processes, a GRPO
group that would straddle two processes, a final save that would write no weights, a vLLM
server layout TRL does not support, LoRA with FSDP and vLLM, transformers rollouts
(``grpo.use_vllm=false``) on parameters sharded by FSDP or ZeRO-3, a training config that does
not validate.

The vLLM server is one engine, tensor-parallel over ``vllm_gpus``: TRL 1.16's ``trl vllm-serve``
says data parallelism above 1 errors out for dense models (vLLM PR #30739), and its client
talks to one server.

    plan = load_plan(REPO_ROOT / "configs/launch/h100x8.yaml")
    checked = validate_plan(plan)
    print("\\n".join(launch_commands(checked)))
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from grasp.paths import REPO_ROOT

DISTRIBUTED_TYPES = ("DEEPSPEED", "FSDP", "MULTI_GPU")


@dataclass
class LaunchPlan:
    """One node's split of GPUs between training, vLLM rollouts and retrieval."""

    name: str
    """Short name, e.g. a100x2."""
    gpus: int
    """GPUs on the node."""
    accelerate_config: str
    """Path (from the repository root) of the accelerate config the trainer runs under."""
    train_gpus: list[int]
    """GPUs of the training processes (one process each)."""
    experiment: str = "grasp_qwen2.5_3b"
    """The training experiment (configs/experiment/)."""
    vllm_gpus: list[int] = field(default_factory=list)
    """GPUs of a ``trl vllm-serve`` server, one engine tensor-parallel over all of them (their
    count must divide the model's attention heads); empty means vLLM colocated."""
    vllm_port: int = 8000
    retrieval_gpu: int | None = None
    """GPU of the retrieval service on this node; None with retrieval_url means another node."""
    retrieval_url: str | None = None
    """URL of a retrieval service on another node (the paper ran retrieval on its own node)."""
    retrieval_port: int = 8001
    index_config: str = "e5_gpu"
    """Index config (configs/index/) of both the retrieval service and the trainer."""
    index_dir: str = "indexes/hotpotqa-train"
    """Index folder the retrieval service serves (built beforehand with scripts/build_index.py)."""
    train_overrides: list[str] = field(default_factory=list)
    """Extra Hydra overrides for scripts/train.py (e.g. grpo.gradient_accumulation_steps=20)."""
    description: str = ""


@dataclass
class CheckedPlan:
    """A plan that validated, with what validation worked out."""

    plan: LaunchPlan
    overrides: list[str]
    """Every Hydra override scripts/train.py gets."""
    per_device_batch: int
    distributed_type: str


def load_plan(path: Path) -> LaunchPlan:
    if not path.exists():
        raise FileNotFoundError(f"no launch plan at {path} (see configs/launch/)")
    raw = yaml.safe_load(path.read_text()) or {}
    merged = OmegaConf.merge(OmegaConf.structured(LaunchPlan), raw)  # unknown keys raise
    plan: LaunchPlan = OmegaConf.to_object(merged)  # type: ignore[assignment]
    return plan


def retrieval_url(plan: LaunchPlan) -> str | None:
    if plan.retrieval_gpu is not None:
        return f"http://localhost:{plan.retrieval_port}"
    return plan.retrieval_url


def train_overrides(plan: LaunchPlan) -> list[str]:
    """The Hydra overrides the plan implies, then the plan's own."""
    overrides = [f"experiment={plan.experiment}", f"index={plan.index_config}"]
    if plan.vllm_gpus:
        overrides += [
            "grpo.use_vllm=true",
            "grpo.vllm_mode=server",
            f"grpo.vllm_server_base_url=http://localhost:{plan.vllm_port}",
        ]
    url = retrieval_url(plan)
    if url:
        overrides.append(f"index.remote_url={url}")
    return overrides + list(plan.train_overrides)


def validate_plan(plan: LaunchPlan, extra_overrides: list[str] | None = None) -> CheckedPlan:
    """Check the plan without a GPU; raise ValueError naming the field at fault."""
    from accelerate.commands.config.config_args import ClusterConfig

    from grasp.train.grpo_args import per_device_batch
    from grasp.train.setup import check_sharded_generation, validate_config

    used = plan.train_gpus + plan.vllm_gpus
    used += [plan.retrieval_gpu] if plan.retrieval_gpu is not None else []
    if not plan.train_gpus:
        raise ValueError(f"launch plan {plan.name}: train_gpus is empty")
    outside = sorted(g for g in used if not 0 <= g < plan.gpus)
    if outside:
        raise ValueError(f"launch plan {plan.name}: GPUs {outside} outside 0..{plan.gpus - 1}")
    twice = sorted({g for g in used if used.count(g) > 1})
    if twice:
        raise ValueError(
            f"launch plan {plan.name}: GPUs {twice} are given to more than one of "
            "train_gpus, vllm_gpus and retrieval_gpu"
        )
    if plan.retrieval_gpu is not None and plan.retrieval_url:
        raise ValueError(f"launch plan {plan.name}: set retrieval_gpu or retrieval_url, not both")

    accelerate_path = REPO_ROOT / plan.accelerate_config
    if not accelerate_path.exists():
        raise FileNotFoundError(f"launch plan {plan.name}: accelerate_config {accelerate_path}")
    cluster = ClusterConfig.from_yaml_file(str(accelerate_path))  # unknown keys raise
    distributed = str(cluster.distributed_type).rsplit(".", 1)[-1]
    if distributed not in DISTRIBUTED_TYPES:
        raise ValueError(f"{accelerate_path}: distributed_type {distributed} is not multi-GPU")
    if cluster.mixed_precision != "bf16":
        raise ValueError(f"{accelerate_path}: mixed_precision must be bf16")
    if distributed == "DEEPSPEED":
        stage = cluster.deepspeed_config.get("zero_stage")
        if stage not in (2, 3):
            raise ValueError(f"{accelerate_path}: deepspeed_config.zero_stage={stage}, not 2 or 3")
    _check_final_save(distributed, cluster, accelerate_path)

    overrides = train_overrides(plan) + list(extra_overrides or [])
    config = compose_train_config(overrides)
    validate_config(config)
    if distributed == "FSDP":
        check_sharded_generation(config, f"FSDP ({plan.accelerate_config}: distributed_type)")
    if distributed == "DEEPSPEED" and cluster.deepspeed_config.get("zero_stage") == 3:
        where = f"ZeRO-3 ({plan.accelerate_config}: deepspeed_config.zero_stage=3)"
        check_sharded_generation(config, where)
    if distributed == "FSDP":
        _check_fsdp_layer(cluster.fsdp_config, config.model.name, accelerate_path)
        if config.grpo.lora.enabled and config.grpo.use_vllm:
            raise ValueError(
                f"launch plan {plan.name}: grpo.lora.enabled=true with grpo.use_vllm=true under "
                f"FSDP ({plan.accelerate_config}): TRL 1.16 marks merging LoRA adapters for the "
                "vLLM weight sync under FSDP as untested; use DeepSpeed, full fine-tuning, or "
                "grpo.use_vllm=false"
            )
    if plan.vllm_gpus:
        _check_tensor_parallel(len(plan.vllm_gpus), config.model.name, plan.name)
    colocated = config.grpo.use_vllm and config.grpo.vllm_mode == "colocate"
    if plan.vllm_gpus and config.grpo.vllm_mode != "server":
        raise ValueError(f"launch plan {plan.name}: vllm_gpus set but grpo.vllm_mode is colocate")
    if not plan.vllm_gpus and config.grpo.use_vllm and not colocated:
        raise ValueError(f"launch plan {plan.name}: vllm_mode=server needs vllm_gpus")
    per_device = per_device_batch(config.grpo, len(plan.train_gpus))
    processes = len(plan.train_gpus)
    if config.grpo.questions_per_step % processes:
        raise ValueError(
            f"launch plan {plan.name}: grpo.questions_per_step={config.grpo.questions_per_step} "
            f"does not split over {processes} training processes: each process must hold whole "
            f"groups (the grpo.num_generations={config.grpo.num_generations} samples of a "
            "question), so questions_per_step must be a multiple of the process count"
        )
    return CheckedPlan(plan, overrides, per_device, distributed)


def compose_train_config(overrides: list[str]):
    """scripts/train.py's configuration for ``overrides``, composed as Hydra would."""
    from hydra import compose, initialize_config_dir

    from grasp.config import register_configs, to_dataclass
    from grasp.train.config import TrainConfig

    register_configs()
    with initialize_config_dir(str(REPO_ROOT / "configs"), version_base=None):
        cfg = compose("train", overrides=overrides)
    return to_dataclass(cfg, TrainConfig)


def _check_final_save(distributed: str, cluster, path: Path) -> None:
    """Refuse a config under which ``Trainer.save_model`` writes no loadable final model.

    Under FSDP, transformers' ``save_model`` writes weights only for a ``FULL_STATE_DICT``;
    under ZeRO-3 it needs the 16-bit weights gathered on save, or it writes only DeepSpeed's
    own shards (to be converted with zero_to_fp32.py).
    """
    if distributed == "FSDP":
        state_dict = cluster.fsdp_config.get("fsdp_state_dict_type")
        if state_dict != "FULL_STATE_DICT":
            raise ValueError(
                f"{path}: fsdp_config.fsdp_state_dict_type={state_dict!r}: the final save "
                "(Trainer.save_model) writes weights under FSDP only for FULL_STATE_DICT"
            )
    if distributed == "DEEPSPEED" and cluster.deepspeed_config.get("zero_stage") == 3:
        if not cluster.deepspeed_config.get("zero3_save_16bit_model"):
            raise ValueError(
                f"{path}: deepspeed_config.zero3_save_16bit_model must be true under ZeRO-3, "
                "or the final model is saved as DeepSpeed shards that from_pretrained cannot load"
            )


def _local_model_config(model_name: str):
    """The model's config when it is on this machine (a folder or the hub cache), else None."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(model_name, local_files_only=True)
    except (OSError, ValueError):
        return None


def _check_tensor_parallel(size: int, model_name: str, plan_name: str) -> None:
    """vLLM splits attention heads over tensor-parallel workers: the size must divide them."""
    config = _local_model_config(model_name)
    heads = getattr(config, "num_attention_heads", None)
    if heads is not None and heads % size:
        raise ValueError(
            f"launch plan {plan_name}: vllm_gpus holds {size} GPUs, the vLLM server's tensor "
            f"parallel size, which does not divide the {heads} attention heads of {model_name}"
        )


def _check_fsdp_layer(fsdp_config: dict, model_name: str, path: Path) -> None:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    wrap = fsdp_config.get("fsdp_transformer_layer_cls_to_wrap")
    config = _local_model_config(model_name)
    if config is not None:
        model_type = config.model_type
    else:  # no local copy: read the family from a hub id such as Qwen/Qwen2.5-3B
        model_type = Path(model_name).name.lower().split("-")[0].split(".")[0]
    class_name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    if class_name is None:
        return  # unknown family: nothing to check against
    import transformers

    no_split = getattr(getattr(transformers, class_name), "_no_split_modules", None) or []
    if wrap not in no_split:
        raise ValueError(
            f"{path}: fsdp_transformer_layer_cls_to_wrap={wrap!r}, but {class_name} "
            f"splits at {no_split}"
        )


def launch_commands(checked: CheckedPlan, model_name: str | None = None) -> list[str]:
    """The shell commands, in start order, that run the plan on its node."""
    plan = checked.plan
    commands: list[str] = []
    serve = (
        f"python scripts/serve_retrieval.py index={plan.index_config} "
        f"index_dir={plan.index_dir} host=0.0.0.0 port={plan.retrieval_port}"
    )
    if plan.retrieval_gpu is not None:
        commands.append(f"CUDA_VISIBLE_DEVICES={plan.retrieval_gpu} {serve} &")
    elif plan.retrieval_url:
        commands.append(f"# on the retrieval node, reached at {plan.retrieval_url}: {serve}")
    if plan.vllm_gpus:
        model = model_name or compose_train_config(checked.overrides).model.name
        gpus = ",".join(map(str, plan.vllm_gpus))
        commands.append(
            f"CUDA_VISIBLE_DEVICES={gpus} trl vllm-serve --model {model} "
            f"--tensor-parallel-size {len(plan.vllm_gpus)} --port {plan.vllm_port} &"
        )
    gpus = ",".join(map(str, plan.train_gpus))
    commands.append(
        f"CUDA_VISIBLE_DEVICES={gpus} accelerate launch --config_file {plan.accelerate_config} "
        f"--num_processes {len(plan.train_gpus)} scripts/train.py "
        + " ".join(shlex.quote(o) for o in checked.overrides)
    )
    return commands
