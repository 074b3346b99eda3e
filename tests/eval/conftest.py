"""Fixtures of the evaluation tests: hand-built trajectories, and the evaluation protocol
(``grasp.eval.protocol``, the work of scripts/evaluate.py) over the tiny questions written as
three datasets' dev files (the loopback judge server,
``judge_server``, is in tests/conftest.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from evaluate_fixture import DATASETS

from grasp.data import write_normalized
from grasp.types import DatasetName, SupportingFact


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory, tiny_questions) -> Path:
    """<dir>/<dataset>/dev.jsonl for the three datasets; 2Wiki's copy has sentence facts."""
    root = tmp_path_factory.mktemp("data")
    for name in DATASETS:
        questions = []
        for q in tiny_questions:
            facts = q.supporting_facts
            if name == "2wikimultihopqa":  # the sentences that answer each question
                facts = tuple(SupportingFact(f.title, f.paragraph_index, 1) for f in facts)
            questions.append(
                dataclasses.replace(
                    q,
                    question_id=f"{name}-{q.question_id}",
                    dataset=DatasetName(name),
                    supporting_facts=facts,
                )
            )
        write_normalized(questions, root / name / "dev.jsonl")
    return root


@pytest.fixture(scope="session")
def index_root(tmp_path_factory) -> Path:
    """Where the evaluations build (and then reuse) each dataset's index."""
    return tmp_path_factory.mktemp("indexes")


@pytest.fixture(scope="session")
def scripted(data_dir, index_root) -> list[str]:
    """The overrides of a scripted-policy evaluation of the fixture datasets."""
    return ["policy=scripted", f"data_dir={data_dir}", f"index_root={index_root}"]
