"""The report tests' run directory (see report_fixture.py), built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixture import build_run_dir


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory, tiny_index, tiny_questions) -> Path:
    return build_run_dir(tmp_path_factory.mktemp("report") / "run", tiny_index, tiny_questions)
