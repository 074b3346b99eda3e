"""How config.json names the code and the dataset of an evaluation (grasp.eval.provenance)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from grasp.eval.provenance import code_version, dataset_identity
from grasp.paths import REPO_ROOT


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _enclosing_checkout(tmp_path: Path) -> tuple[Path, str]:
    """A fresh git repository with one commit and an untracked folder ``code`` in it; and the
    commit."""
    outer = tmp_path / "outer"
    (outer / "code").mkdir(parents=True)
    _git(outer, "init", "-q")
    (outer / "README").write_text("another project\n")
    _git(outer, "add", "README")
    _git(outer, "commit", "-q", "-m", "another project")
    (outer / "README").write_text("edited\n")  # so that its checkout is dirty
    return outer, _git(outer, "rev-parse", "HEAD")


def test_the_checkout_records_its_own_commit():
    head = _git(REPO_ROOT, "rev-parse", "HEAD")
    code = code_version()
    assert code["git_commit"] == head
    assert isinstance(code["git_dirty"], bool)


def test_a_folder_inside_another_checkout_records_no_commit(tmp_path):
    outer, _ = _enclosing_checkout(tmp_path)
    assert code_version(outer / "code") == {"git_commit": None, "git_dirty": None}
    assert code_version(outer)["git_commit"] is not None  # its own top level: recorded


def test_a_copy_of_the_package_inside_another_checkout_records_no_commit(tmp_path):
    outer, outer_commit = _enclosing_checkout(tmp_path)
    shutil.copytree(
        REPO_ROOT / "grasp", outer / "code" / "grasp", ignore=shutil.ignore_patterns("__pycache__")
    )
    env = {**os.environ, "PYTHONPATH": str(outer / "code")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, grasp.eval.provenance as p; "
            "print(json.dumps([p.__file__, p.code_version()]))",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    module, code = json.loads(done.stdout)
    assert Path(module).is_relative_to(outer / "code")  # the copy, not this checkout
    assert code == {"git_commit": None, "git_dirty": None}
    assert outer_commit not in done.stdout


def test_a_bundled_file_is_named_relative_to_the_checkout_with_its_checksum():
    path = REPO_ROOT / "data" / "musique" / "dev.jsonl"
    identity = dataset_identity("musique", "normalized", path)
    assert identity == {
        "name": "musique",
        "source": "normalized",
        "path": "data/musique/dev.jsonl",
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }


def test_a_file_outside_the_checkout_keeps_its_path_and_an_edit_changes_its_checksum(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text('{"id": "q1"}\n')
    before = dataset_identity("hotpotqa", "raw", path)
    assert before["path"] == str(path)
    path.write_text('{"id": "q2"}\n')
    assert dataset_identity("hotpotqa", "raw", path)["sha256"] != before["sha256"]


def test_a_hub_dataset_has_no_path_and_no_checksum():
    identity = dataset_identity("hotpotqa", "hub", None)
    assert identity == {"name": "hotpotqa", "source": "hub", "path": None, "sha256": None}
