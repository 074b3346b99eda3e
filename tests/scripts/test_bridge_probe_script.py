"""scripts/bridge_probe.py end to end on the tiny corpus: its questions as a split's file, its
real index, top-1; and a missing index refused before anything is written."""

from __future__ import annotations

import json
import subprocess
import sys

from grasp.data import write_normalized
from grasp.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "bridge_probe.py"


def test_the_probe_writes_its_report_and_prints_its_table(tmp_path, tiny_questions, tiny_index_dir):
    write_normalized(list(tiny_questions), tmp_path / "data" / "hotpotqa" / "train.jsonl")
    out = tmp_path / "probe.json"
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            f"dataset.path={tmp_path / 'data' / 'hotpotqa' / 'train.jsonl'}",
            f"index_dir={tiny_index_dir}",
            "k=1",
            f"out={out}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    report = json.loads(out.read_text())
    assert (report["dataset"], report["split"], report["k"]) == ("hotpotqa", "train", 1)
    assert report["questions"] == len(tiny_questions)
    assert report["lacking"] == len(report["episodes"])
    assert "q-python" in {e["question_id"] for e in report["episodes"]}
    assert "| entity_words | " in result.stdout


def test_a_missing_index_is_named_with_how_to_build_it(tmp_path):
    out = tmp_path / "probe.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), f"index_dir={tmp_path / 'none'}", f"out={out}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert "scripts/build_index.py dataset=hotpotqa split=train" in result.stderr
    assert not out.exists()
