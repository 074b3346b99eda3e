"""How config.json names the dataset an evaluation read (grasp.eval.provenance)."""

from __future__ import annotations

import hashlib

from grasp.eval.provenance import dataset_identity
from grasp.paths import REPO_ROOT


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
