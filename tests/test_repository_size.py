"""The tracked tree stays small enough to clone quickly and to copy to a GPU machine.

A GPU machine accepts 64 MiB of files in one call, and every long run adds results: this
check fails CI when a commit pushes the tracked files over ``BUDGET_BYTES``, commits a
finished evaluation's trajectories uncompressed (``python scripts/compress_results.py``
stores them as .xz), or keeps more training checkpoints than a run in progress needs.

A run that outlasts a session is continued from the repository, so what resumes it is
committed while it trains: its latest checkpoint (adapter, optimizer and scheduler state) and
the warm start's adapter that checkpoint's adapter is trained on top of, both in float32 as
the run uses them. They are counted apart (``CHECKPOINT_BYTES``, ``WARM_START_BYTES``), for an
unfinished run only: once its ``final/`` is in, the checkpoint goes and both adapters count
(a finished run stores them in bfloat16). Skipped outside a git checkout (an unpacked archive
has no index).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict

import pytest

from grasp.paths import REPO_ROOT

BUDGET_BYTES = 64_000_000
"""Every tracked file but a run's committed checkpoint, kept under the 64 MiB (67.1 MB) a GPU
machine accepts in one call. 60.0 MB once run 2's adapters went (the demo's policy and the
adapter benchmark's default come from results/cpu_grasp_v2, whose adapters are stored in
bfloat16) and both of cpu_grasp_v2's rows joined the baseline table; the rest is room for the
next run's results. Superseded runs keep their adapters' configs, and their READMEs name the
commit that holds the weights."""
CHECKPOINT_BYTES = 35_000_000
"""One LoRA checkpoint of a CPU run: a rank-8 SmolLM2 adapter and its AdamW state, 29 MB."""
PLAIN_LIMIT_BYTES = 1_000_000
"""A tracked trajectories.jsonl under results/ larger than this should be stored as .xz."""
WARM_START_BYTES = 10_000_000
"""The float32 warm-start adapter of a CPU run in progress: rank-8 LoRA on SmolLM2, 9.8 MB."""
CHECKPOINT = re.compile(r"^(results/.+)/checkpoints/(checkpoint-\d+)/")
WARM_START_ADAPTER = "warm_start/adapter/"


def _tracked() -> dict[str, int]:
    """Each tracked file present in the work tree -> its size in bytes."""
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to measure")
    listed = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "-z"], capture_output=True, check=True
    )
    names = [name for name in listed.stdout.decode().split("\0") if name]
    return {n: (REPO_ROOT / n).stat().st_size for n in names if (REPO_ROOT / n).is_file()}


def checkpoints_by_run(sizes: dict[str, int]) -> dict[str, dict[str, int]]:
    """Run folder -> {checkpoint folder name: its tracked bytes}."""
    runs: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for name, size in sizes.items():
        match = CHECKPOINT.match(name)
        if match:
            runs[match[1]][match[2]] += size
    return runs


def finished(run: str, sizes: dict[str, int]) -> bool:
    """Whether ``run`` has its final/ committed."""
    return f"{run}/final/adapter_config.json" in sizes


def resume_state(sizes: dict[str, int]) -> set[str]:
    """The tracked files that resume an unfinished run: its checkpoint and its warm start's
    adapter (a run is unfinished while it keeps a checkpoint and no final/)."""
    names = {n for n in sizes if CHECKPOINT.match(n)}
    for run in checkpoints_by_run(sizes):
        if not finished(run, sizes):
            names |= {n for n in sizes if n.startswith(f"{run}/{WARM_START_ADAPTER}")}
    return names


def test_the_tracked_files_fit_the_budget():
    sizes = _tracked()
    apart = resume_state(sizes)
    rest = {n: s for n, s in sizes.items() if n not in apart}
    total = sum(rest.values())
    largest = sorted(rest, key=rest.get, reverse=True)[:5]
    assert total <= BUDGET_BYTES, (
        f"the tracked files are {total:,} B, over the budget of {BUDGET_BYTES:,} B; largest: "
        + ", ".join(f"{n} ({rest[n]:,} B)" for n in largest)
    )


def test_only_an_unfinished_run_keeps_a_checkpoint_and_only_its_latest():
    sizes = _tracked()
    for run, checkpoints in checkpoints_by_run(sizes).items():
        assert len(checkpoints) == 1, f"{run}: commit only its latest checkpoint, not {checkpoints}"
        assert not finished(run, sizes), (
            f"{run} is finished (final/ is committed): its checkpoint can go"
        )
        (size,) = checkpoints.values()
        assert size <= CHECKPOINT_BYTES, f"{run}: a checkpoint of {size:,} B"
        prefix = f"{run}/{WARM_START_ADAPTER}"
        adapter = sum(s for n, s in sizes.items() if n.startswith(prefix))
        assert adapter <= WARM_START_BYTES, f"{run}: a warm-start adapter of {adapter:,} B"


def test_checkpoints_are_grouped_by_run_and_step():
    sizes = {
        "results/a/checkpoints/checkpoint-5/optimizer.pt": 20,
        "results/a/checkpoints/checkpoint-5/adapter_model.safetensors": 10,
        "results/ab/x/checkpoints/checkpoint-10/trainer_state.json": 1,
        "results/a/final/adapter_model.safetensors": 10,
        "runs/a/checkpoints/checkpoint-5/optimizer.pt": 20,
    }
    assert checkpoints_by_run(sizes) == {
        "results/a": {"checkpoint-5": 30},
        "results/ab/x": {"checkpoint-10": 1},
    }


def test_a_runs_warm_start_adapter_is_counted_apart_only_while_the_run_is_unfinished():
    training = {
        "results/a/checkpoints/checkpoint-5/optimizer.pt": 20,
        "results/a/warm_start/adapter/adapter_model.safetensors": 10,
        "results/a/warm_start/episodes.jsonl": 3,
        "results/b/warm_start/adapter/adapter_model.safetensors": 10,  # no checkpoint
    }
    assert resume_state(training) == {
        "results/a/checkpoints/checkpoint-5/optimizer.pt",
        "results/a/warm_start/adapter/adapter_model.safetensors",
    }
    finished = {**training, "results/a/final/adapter_config.json": 1}
    assert resume_state(finished) == {"results/a/checkpoints/checkpoint-5/optimizer.pt"}


def test_no_large_trajectory_file_is_committed_uncompressed():
    plain = [
        name
        for name, size in _tracked().items()
        if name.startswith("results/")
        and name.endswith("trajectories.jsonl")
        and size > PLAIN_LIMIT_BYTES
    ]
    assert not plain, f"store these as .xz (python scripts/compress_results.py): {plain}"
