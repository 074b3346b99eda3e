"""No module outside grasp/train/run_folder.py spells a run folder's file name.

The package and the scripts are read from the source. A string (docstrings and comments aside)
spells a name:

- a file name (``results.json``, ``metrics.jsonl``...) wherever it appears in it, a message
  included: the message should say what the constant says;
- a folder name (``final``, ``eval_after``...) where the string builds a path: an operand of
  ``/``, an argument of ``Path``, ``joinpath`` or ``with_name``, a path component beside a
  ``/`` (``"runs/x/final"``, an f-string's ``"/final"``), or the value of an upper-case
  constant (``FINAL = "final"``). The same word as a config value (``stage="final"``) or a
  dict key is no path.

Two other formats own files of the same name: an evaluation folder's ``results.json`` and
``config.json`` are grasp/eval/results.py's, a model folder's ``config.json`` grasp/models.py's.
Files another engineer was changing at the time (``PENDING``) keep their spellings until they
move to the constants; the list is exact, so that it only shrinks.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from grasp.paths import REPO_ROOT
from grasp.train import run_folder

FILE_NAMES = (
    run_folder.CONFIG_FILE,
    run_folder.RESULTS_FILE,
    run_folder.METRICS_FILE,
    run_folder.DEV_CURVE_FILE,
    run_folder.CURVES_PLOT,
    run_folder.AFTER_STEP_FILE,
)
FOLDER_NAMES = (
    run_folder.DEV_CURVE_DIR,
    run_folder.EVAL_BEFORE_DIR,
    run_folder.EVAL_AFTER_DIR,
    run_folder.ROLLOUTS_DIR,
    run_folder.TRAJECTORIES_DIR,
    run_folder.CHECKPOINTS_DIR,
    run_folder.FINAL_DIR,
    run_folder.WARM_START_DIR,
)
OWNERS = {
    "grasp/train/run_folder.py": set(FILE_NAMES) | set(FOLDER_NAMES),
    "grasp/eval/results.py": {run_folder.RESULTS_FILE, run_folder.CONFIG_FILE},
    "grasp/models.py": {run_folder.CONFIG_FILE},
}
"""Each module that may spell a name, and the names it owns."""
PENDING = {
    ("grasp/bench/config.py", "final"): 1,
    ("grasp/bench/config.py", "warm_start"): 1,
    ("grasp/bench/train_step.py", "warm_start"): 1,
    ("grasp/experiments/baseline_table.py", "results.json"): 4,
}
"""Spellings in files that were being changed elsewhere when the names moved here (the
adapters' default paths into results/cpu_grasp_v2, the benchmark's warm_start/, the baseline
table's evaluation results.json and its notes): each to move to its owner's constant."""
PATH_CALLS = {"Path", "PurePath", "joinpath", "with_name"}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of every string that is a statement of its own (module, class, function and
    attribute docstrings)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _path_strings(tree: ast.AST) -> set[int]:
    """The ids of the strings that build a path or name a constant (see the docstring)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            found.update(id(side) for side in (node.left, node.right))
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in PATH_CALLS:
                found.update(id(arg) for arg in node.args)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id.isupper() for t in node.targets
        ):
            found.add(id(node.value))
    return found


def spelled(text: str, builds_path: bool) -> list[str]:
    """The run folder's names that the string ``text`` spells."""
    names = [n for n in FILE_NAMES if re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", text)]
    for folder in FOLDER_NAMES:
        component = re.search(rf"(^|/){re.escape(folder)}(/|$)", text) and "/" in text
        if (builds_path and text.strip("/") == folder) or component:
            names.append(folder)
    return names


def spellings(source: str) -> list[str]:
    """Every run folder name spelled in ``source``, once per string that spells it."""
    tree = ast.parse(source)
    docstrings, paths = _docstrings(tree), _path_strings(tree)
    return [
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
        for name in spelled(node.value, id(node) in paths)
    ]


def modules() -> list[Path]:
    return sorted([*(REPO_ROOT / "grasp").rglob("*.py"), *(REPO_ROOT / "scripts").glob("*.py")])


def test_no_module_outside_run_folder_spells_a_run_folder_name():
    found: Counter[tuple[str, str]] = Counter()
    for path in modules():
        module = str(path.relative_to(REPO_ROOT))
        owned = OWNERS.get(module, set())
        found.update((module, name) for name in spellings(path.read_text()) if name not in owned)
    assert dict(found) == PENDING


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('path = run_dir / "results.json"', ["results.json"]),
        ('raise ValueError(f"{run_dir}: no config.json here")', ["config.json"]),
        ('path = run_dir / "final"', ["final"]),
        ('path = Path(run_dir, "checkpoints")', ["checkpoints"]),
        ('path = run_dir.joinpath("eval_after")', ["eval_after"]),
        ('path = f"{run_dir}/warm_start/adapter"', ["warm_start"]),
        ('adapters = ["results/cpu_grasp_v2/final"]', ["final"]),
        ('FINAL = "final"', ["final"]),
        ('log.info("see %s", "trajectories/step_000001.jsonl")', ["trajectories"]),
        ('x = "dev_curve.jsonl" + "metrics.jsonl"', ["dev_curve.jsonl", "metrics.jsonl"]),
        ('"""A docstring may say results.json, final/ and eval_after/."""', []),
        ('stage: str = "final"', []),
        ('enabled = resolved.get("warm_start", {}).get("enabled")', []),
        ('report = {"checkpoints": names, "final": True}', []),
        ('text = "the final model"', []),
        ('path = out / "trajectories.jsonl"', []),
        ('path = run_dir / "results.jsonl"', []),
    ],
)
def test_the_scan_sees_a_spelling_and_passes_a_word(source, expected):
    assert spellings(source) == expected


def test_every_owner_and_pending_file_exists():
    assert all((REPO_ROOT / module).is_file() for module in OWNERS)
    assert all((REPO_ROOT / module).is_file() for module, _ in PENDING)
