"""scripts/compress_results.py: every finished folder it can store is stored, and a folder it
must not touch (both forms there, a file it cannot remove) is named and left as it was."""

from __future__ import annotations

import lzma
import os
import subprocess
import sys

from grasp.eval.resume import LOCK_FILE
from grasp.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "compress_results.py"


def _records(count: int) -> str:
    return "".join(f'{{"episode_id": "q{i}#0"}}\n' for i in range(count))


def _finished(folder, trajectories: str | None = None, stored: str | None = None) -> None:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text("{}")
    if trajectories is not None:
        (folder / "trajectories.jsonl").write_text(trajectories)
    if stored is not None:
        (folder / "trajectories.jsonl.xz").write_bytes(lzma.compress(stored.encode()))


def _contents(folder) -> dict[str, bytes]:
    """Every file but the folder's lock (held while the script looks at it): name -> bytes."""
    files = (p for p in folder.rglob("*") if p.is_file() and p.name != LOCK_FILE)
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


def test_both_forms_are_refused_naming_them_and_the_other_folders_are_still_stored(tmp_path):
    """Issue 48 item 3: E2 holds trajectories.jsonl.xz (485 records) and trajectories.jsonl
    (100); the script compressed the plain one over the stored one, losing 385 trajectories."""
    root = tmp_path / "results"
    _finished(root / "E1", trajectories=_records(3))
    _finished(root / "E2", trajectories=_records(100), stored=_records(485))
    _finished(root / "E3", trajectories=_records(2))
    e2 = _contents(root / "E2")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), f"root={root}"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    plain, packed = root / "E2" / "trajectories.jsonl", root / "E2" / "trajectories.jsonl.xz"
    assert done.stderr.splitlines() == [
        f"not stored: {plain} (100 records) and {packed} (485 records) both exist: compressing "
        "would replace the stored records with the plain ones. Keep the one that holds every "
        "record and delete the other",
        "error: 1 of 3 finished trajectory files not stored (named above)",
    ]
    assert _contents(root / "E2") == e2
    for name, count in (("E1", 3), ("E3", 2)):
        assert sorted(_contents(root / name)) == ["results.json", "trajectories.jsonl.xz"]
        stored = lzma.decompress((root / name / "trajectories.jsonl.xz").read_bytes())
        assert stored.decode() == _records(count)
    assert done.stdout.splitlines()[-1].startswith("2 trajectory files compressed: ")
