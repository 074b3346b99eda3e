"""The tracked tree stays small enough to clone quickly and to copy to a GPU machine.

A GPU machine accepts 64 MiB of files in one call, and every long run adds results: this
check fails CI when a commit pushes the tracked files over ``BUDGET_BYTES``, or commits a
finished evaluation's trajectories uncompressed (``python scripts/compress_results.py``
stores them as .xz). Skipped outside a git checkout (an unpacked archive has no index).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from grasp.paths import REPO_ROOT

BUDGET_BYTES = 125_000_000
"""The tracked files' total size today (123 MB after the trajectories were compressed and
duplicate adapters dropped) plus a little room; lower it as the remaining weights under
results/ go (the target is under 50 MB)."""
PLAIN_LIMIT_BYTES = 1_000_000
"""A tracked trajectories.jsonl under results/ larger than this should be stored as .xz."""


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to measure")
    listed = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "-z"], capture_output=True, check=True
    )
    return [name for name in listed.stdout.decode().split("\0") if name]


def test_the_tracked_files_fit_the_budget():
    sizes = {n: (REPO_ROOT / n).stat().st_size for n in _tracked() if (REPO_ROOT / n).is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.get, reverse=True)[:5]
    assert total <= BUDGET_BYTES, (
        f"the tracked files are {total:,} B, over the budget of {BUDGET_BYTES:,} B; largest: "
        + ", ".join(f"{n} ({sizes[n]:,} B)" for n in largest)
    )


def test_no_large_trajectory_file_is_committed_uncompressed():
    plain = [
        name
        for name in _tracked()
        if name.startswith("results/")
        and name.endswith("trajectories.jsonl")
        and (REPO_ROOT / name).stat().st_size > PLAIN_LIMIT_BYTES
    ]
    assert not plain, f"store these as .xz (python scripts/compress_results.py): {plain}"
