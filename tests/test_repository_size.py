"""The tracked tree stays small enough to clone quickly and to copy to a GPU machine.

A GPU machine accepts 64 MiB of files in one call, and every long run adds results: this
check fails CI when a commit pushes the tracked files over ``BUDGET_BYTES``, commits a
finished evaluation's trajectories uncompressed (``python scripts/compress_results.py``
stores them as .xz), or keeps more training checkpoints than a run in progress needs.

A run that outlasts a session is continued from the repository, so its latest checkpoint
(adapter, optimizer and scheduler state) is committed while it trains; that checkpoint is
counted apart (``CHECKPOINT_BYTES``), one per unfinished run, and goes once the run's
``final/`` is in. Skipped outside a git checkout (an unpacked archive has no index).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict

import pytest

from grasp.paths import REPO_ROOT

BUDGET_BYTES = 80_000_000
"""Every tracked file but a run's committed checkpoint. 64.4 MB once the superseded runs'
adapters went and run 2's were stored in bfloat16, plus the run in progress in
results/cpu_grasp_v2 (its warm start's float32 adapter, 9.8 MB, and its dev curve) and a
little room. The target is under 50 MB: run 2's adapters (19.6 MB) go when the demo's policy
comes from the newer run, and that run's adapters are stored in bfloat16 once it finishes."""
CHECKPOINT_BYTES = 35_000_000
"""One LoRA checkpoint of a CPU run: a rank-8 SmolLM2 adapter and its AdamW state, 29 MB."""
PLAIN_LIMIT_BYTES = 1_000_000
"""A tracked trajectories.jsonl under results/ larger than this should be stored as .xz."""
CHECKPOINT = re.compile(r"^(results/.+)/checkpoints/(checkpoint-\d+)/")


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


def test_the_tracked_files_fit_the_budget():
    sizes = _tracked()
    rest = {n: s for n, s in sizes.items() if not CHECKPOINT.match(n)}
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
        assert f"{run}/final/adapter_config.json" not in sizes, (
            f"{run} is finished (final/ is committed): its checkpoint can go"
        )
        (size,) = checkpoints.values()
        assert size <= CHECKPOINT_BYTES, f"{run}: a checkpoint of {size:,} B"


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


def test_no_large_trajectory_file_is_committed_uncompressed():
    plain = [
        name
        for name, size in _tracked().items()
        if name.startswith("results/")
        and name.endswith("trajectories.jsonl")
        and size > PLAIN_LIMIT_BYTES
    ]
    assert not plain, f"store these as .xz (python scripts/compress_results.py): {plain}"
