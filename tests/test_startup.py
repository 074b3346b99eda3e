"""grasp.startup: no entry point lets JAX take the GPU, and the GPU memory log at start.

bm25s (imported by grasp.corpus) runs ``jax.lax.top_k`` at import time when JAX is
importable, which initialises JAX's default backend: the GPU, with XLA's preallocation of 75%
of its memory. These tests put a stand-in ``jax`` first on the path of a subprocess (the real
one need not be installed); the stand-in records which platform a computation would initialise,
honouring ``JAX_PLATFORMS`` as the real one does. The control test shows the stand-in records a
GPU when nothing configures the process, so the entry-point tests can fail.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grasp import startup
from grasp.paths import REPO_ROOT

SCRIPTS = sorted((REPO_ROOT / "scripts").glob("*.py"))

BEFORE_THE_CALL = {"__future__", "os", "sys", "pathlib", "grasp.startup"}
"""Modules an entry point may import before it configures the process: none imports a
third-party package."""

STANDIN_INIT = '''\
"""Stand-in for JAX: records the platform a computation would initialise (tests/test_startup.py)."""

import json
import os


def initialise_backend():
    # Unset or empty, real JAX initialises every platform it finds and computes on the first
    # of GPU, then CPU; JAX_PLATFORMS=cpu restricts it to the CPU.
    platforms = os.environ.get("JAX_PLATFORMS") or "cuda,cpu"
    record = {
        "platforms": platforms.split(","),
        "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
    }
    with open(os.environ["STANDIN_JAX_RECORD"], "a") as out:
        out.write(json.dumps(record) + "\\n")
'''

STANDIN_LAX = '''\
"""Stand-in for jax.lax: top_k initialises the backend, as the real one does on first use."""

import numpy as np

import jax


def top_k(operand, k):
    jax.initialise_backend()
    operand = np.asarray(operand)
    indices = np.argsort(-operand, kind="stable")[..., :k]
    return np.take_along_axis(operand, indices, axis=-1), indices
'''

CONFIGURED = ("JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE", "USE_JAX", "USE_FLAX", "USE_TF")


def _run_with_standin_jax(tmp_path: Path, code: str) -> list[dict]:
    """Run ``code`` in a fresh interpreter with the stand-in JAX first on its path, from an
    environment with none of the startup settings; the backend initialisations it recorded."""
    site = tmp_path / "site"
    (site / "jax").mkdir(parents=True)
    (site / "jax" / "__init__.py").write_text(STANDIN_INIT)
    (site / "jax" / "lax.py").write_text(STANDIN_LAX)
    record = tmp_path / "jax_record.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in CONFIGURED}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO_ROOT)])
    env["STANDIN_JAX_RECORD"] = str(record)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "STANDIN_JAX=" in done.stdout, done.stdout  # the stand-in, not a real JAX, was found
    standin = done.stdout.split("STANDIN_JAX=")[1].split()[0]
    assert Path(standin).is_relative_to(site)
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


def test_without_the_startup_settings_importing_bm25s_initialises_jax_on_the_gpu(tmp_path):
    recorded = _run_with_standin_jax(
        tmp_path,
        """
        import bm25s
        import jax
        print("STANDIN_JAX=" + jax.__file__)
        """,
    )
    assert recorded, "bm25s no longer runs JAX at import: the entry-point tests prove nothing"
    assert recorded[0]["platforms"][0] == "cuda"
    assert recorded[0]["preallocate"] is None


def test_importing_the_package_from_anywhere_keeps_jax_off_the_gpu(tmp_path):
    """A notebook or ``python -c`` that imports grasp.corpus without an entry point's
    preamble: the package itself applies the settings first."""
    recorded = _run_with_standin_jax(
        tmp_path,
        """
        import grasp.corpus
        import jax
        print("STANDIN_JAX=" + jax.__file__)
        """,
    )
    assert recorded, "bm25s no longer runs JAX at import: nothing to check"
    assert [r["platforms"] for r in recorded] == [["cpu"]] * len(recorded)
    assert {r["preallocate"] for r in recorded} == {"false"}


@pytest.mark.parametrize("script", ["train.py", "build_index.py"])
def test_an_entry_points_imports_initialise_no_jax_gpu_backend(tmp_path, script):
    """Every module the script imports, as ``python scripts/<script>`` would (without
    running its main), plus the rest of the training stack for good measure."""
    recorded = _run_with_standin_jax(
        tmp_path,
        f"""
        import runpy
        runpy.run_path("scripts/{script}", run_name="startup_check")
        import datasets, trl, grasp.corpus, grasp.train.trainer, jax
        print("STANDIN_JAX=" + jax.__file__)
        """,
    )
    assert recorded, "bm25s no longer runs JAX at import: nothing to check"
    for initialisation in recorded:
        assert initialisation["platforms"] == ["cpu"]
        assert initialisation["preallocate"] == "false"


def _statement_imports(node: ast.stmt) -> list[str] | None:
    """The modules an import statement imports, or None when ``node`` is not an import."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return None


def _is_sys_path_edit(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func).startswith("sys.path.")
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_script_configures_the_process_before_its_other_imports(script):
    body = ast.parse(script.read_text()).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the module docstring
    for node in body:
        imported = _statement_imports(node)
        if imported is not None:
            assert set(imported) <= BEFORE_THE_CALL, (
                f"line {node.lineno} imports {imported} before the process is configured"
            )
        elif not _is_sys_path_edit(node):
            break
    else:
        pytest.fail("no statement after the imports")
    assert ast.unparse(node) == "os.environ.update(process_environment())", (
        f"line {node.lineno}: the first statement after the startup imports must configure "
        "the process"
    )


def test_a_users_explicit_choice_wins_over_the_startup_settings(monkeypatch):
    for name in CONFIGURED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    settings = startup.process_environment()
    assert settings == {
        "JAX_PLATFORMS": "cuda",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
        "USE_JAX": "0",
        "USE_FLAX": "0",
        "USE_TF": "0",
    }


def test_the_startup_module_imports_nothing_heavy():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, grasp.startup; print(sorted(m for m in ('torch', 'numpy', 'jax') "
            "if m in sys.modules)); print(sorted(m for m in sys.modules if m.startswith('grasp')))",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "['grasp', 'grasp.startup']"]


class _FakeCuda:
    """torch.cuda on one GPU of 100 GiB, 5 GiB of it reserved by torch, ``free_gib`` free."""

    GIB = 1 << 30

    def __init__(self, free_gib: float):
        self.free = int(free_gib * self.GIB)

    def is_available(self):
        return True

    def device_count(self):
        return 1

    def current_device(self):
        return 0

    def mem_get_info(self, device):
        return self.free, 100 * self.GIB

    def memory_reserved(self, device):
        return 5 * self.GIB


def test_the_gpu_memory_log_warns_when_another_framework_holds_much_of_the_gpu(monkeypatch, caplog):
    import torch

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(torch, "cuda", _FakeCuda(free_gib=20))
    with caplog.at_level(logging.INFO, logger="grasp.startup"):
        held = startup.log_gpu_memory()
    assert held == {
        "device": 0,
        "total": 100 * _FakeCuda.GIB,
        "free": 20 * _FakeCuda.GIB,
        "torch_reserved": 5 * _FakeCuda.GIB,
        "outside_torch": 75 * _FakeCuda.GIB,
    }
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "75.0 GiB" in warnings[0].getMessage()


def test_the_gpu_memory_log_is_quiet_when_the_gpu_is_free_or_absent(monkeypatch, caplog):
    import torch

    monkeypatch.setattr(torch, "cuda", _FakeCuda(free_gib=94.5))
    with caplog.at_level(logging.INFO, logger="grasp.startup"):
        assert startup.log_gpu_memory()["outside_torch"] == int(0.5 * _FakeCuda.GIB)
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    monkeypatch.setattr(_FakeCuda, "is_available", lambda self: False)
    assert startup.log_gpu_memory() is None


def _decorators(script: Path) -> list[str] | None:
    """The decorators of the script's ``main`` in source order, or None without one."""
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == "main":
            return [ast.unparse(d).split("(")[0] for d in node.decorator_list]
    return None


HYDRA_SCRIPTS = [s for s in SCRIPTS if "hydra.main" in (_decorators(s) or [])]


@pytest.mark.parametrize("script", HYDRA_SCRIPTS, ids=lambda p: p.name)
def test_every_hydra_entry_point_ends_an_expected_error_in_one_line(script):
    """Issue 48 (minor): the decorator right below ``@hydra.main`` (above it, Hydra would have
    caught the error and printed its traceback first)."""
    assert _decorators(script) == ["hydra.main", "one_line_errors"]


def test_the_hydra_entry_points_are_found():
    assert len(HYDRA_SCRIPTS) >= 20
    assert {"train.py", "evaluate.py", "compress_results.py"} <= {s.name for s in HYDRA_SCRIPTS}


def test_an_expected_error_ends_in_one_line_and_a_bug_keeps_its_traceback(monkeypatch):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)

    def failing(error: BaseException):
        @startup.one_line_errors
        def main(cfg: object) -> None:
            """The entry point."""
            raise error

        return main

    with pytest.raises(SystemExit) as ended:
        failing(NotADirectoryError("index directory x: x is a symlink loop\nuse a folder"))(None)
    assert ended.value.code == (
        "error: NotADirectoryError: index directory x: x is a symlink loop use a folder"
    )
    with pytest.raises(SystemExit) as ended:
        failing(ValueError("env.top_k=0 must be at least 1"))(None)
    assert ended.value.code == "error: ValueError: env.top_k=0 must be at least 1"
    with pytest.raises(KeyError, match="a bug"):
        failing(KeyError("a bug"))(None)
    assert failing(KeyError()).__doc__ == "The entry point."
    assert failing(KeyError()).__wrapped__.__name__ == "main"  # how Hydra finds the script
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    with pytest.raises(ValueError, match="top_k"):
        failing(ValueError("env.top_k=0 must be at least 1"))(None)


def test_the_evaluation_script_names_an_index_folder_symlink_loop_in_one_line(tmp_path):
    """Issue 48 (minor): the loop was named exactly (IndexPathError), under Hydra's traceback."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "evaluate.py"),
            "policy=scripted",
            "datasets=[hotpotqa]",
            "n=1",
            f"index_root={tmp_path / 'a'}",
            f"out={tmp_path / 'out'}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: IndexPathError: index directory {tmp_path / 'a' / 'hotpotqa-dev'}: "
        f"{tmp_path / 'a'} is a symlink loop (following it leads back to it); use a folder, or "
        "a path still to be created, as the index directory"
    ]
