"""Shared fixtures: a tiny hand-written corpus whose real indexes build in seconds, and the
scripts loaded as modules."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from grasp.paths import REPO_ROOT
from grasp.types import DatasetName, Paragraph, Question, SupportingFact

P = {
    "curie": Paragraph(
        "Marie Curie",
        (
            "Marie Curie was a Polish and naturalised-French physicist and chemist.",
            "She discovered the elements polonium and radium with her husband Pierre.",
            "She was the first woman to win a Nobel Prize.",
        ),
    ),
    "warsaw": Paragraph(
        "Warsaw",
        (
            "Warsaw is the capital and largest city of Poland.",
            "The city stands on the Vistula River in east-central Poland.",
        ),
    ),
    "everest": Paragraph(
        "Mount Everest",
        (
            "Mount Everest is Earth's highest mountain above sea level.",
            "It is located in the Mahalangur Himal sub-range of the Himalayas.",
        ),
    ),
    "hillary": Paragraph(
        "Edmund Hillary",
        (
            "Sir Edmund Hillary was a New Zealand mountaineer and explorer.",
            "He and Tenzing Norgay were the first climbers confirmed to have reached the "
            "summit of Mount Everest in 1953.",
        ),
    ),
    "auckland": Paragraph(
        "Auckland",
        (
            "Auckland is the largest city in New Zealand.",
            "Hillary was born in Auckland in 1919.",
        ),
    ),
    "python": Paragraph(
        "Python (programming language)",
        (
            "Python is a high-level programming language created by Guido van Rossum.",
            "It was first released in 1991.",
        ),
    ),
    "guido": Paragraph(
        "Guido van Rossum",
        (
            "Guido van Rossum is a Dutch programmer.",
            "He worked at Google and later at Dropbox and Microsoft.",
        ),
    ),
    "amazon": Paragraph(
        "Amazon River",
        (
            "The Amazon River in South America is the largest river by discharge volume.",
            "It flows through Brazil, Peru and Colombia.",
            "",
        ),
    ),
}


def _question(
    qid: str, text: str, answer: str, gold: list[str], distractors: list[str]
) -> Question:
    keys = gold + distractors
    paragraphs = tuple(Paragraph(P[k].title, P[k].sentences, is_supporting=k in gold) for k in keys)
    facts = tuple(SupportingFact(P[k].title, i, None) for i, k in enumerate(gold))
    return Question(qid, DatasetName.HOTPOTQA, text, (answer,), "bridge", paragraphs, facts)


TINY_QUESTIONS = (
    _question(
        "q-curie",
        "Which elements did the physicist born in the capital of Poland discover?",
        "polonium and radium",
        ["curie", "warsaw"],
        ["amazon", "python"],
    ),
    _question(
        "q-hillary",
        "In which city was the first climber to reach the summit of Mount Everest born?",
        "Auckland",
        ["hillary", "auckland"],
        ["everest", "curie"],
    ),
    _question(
        "q-python",
        "Which company did the creator of the Python programming language work for?",
        "Google",
        ["python", "guido"],
        ["warsaw", "amazon"],
    ),
)


@pytest.fixture(scope="session")
def tiny_questions() -> tuple[Question, ...]:
    return TINY_QUESTIONS


@pytest.fixture(scope="session")
def tiny_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real index (MiniLM + FAISS Flat + bm25s, both granularities) over the tiny corpus."""
    from grasp.corpus import IndexConfig, build_index

    directory = tmp_path_factory.mktemp("tiny-index")
    build_index(TINY_QUESTIONS, IndexConfig(), directory)
    return directory


@pytest.fixture(scope="session")
def tiny_index(tiny_index_dir: Path):
    from grasp.corpus import CorpusIndex

    return CorpusIndex.load(tiny_index_dir)


@pytest.fixture(scope="session")
def load_script() -> Iterator[Callable[[str], ModuleType]]:
    """``load_script("evaluate")``: scripts/evaluate.py as the module ``evaluate_script``.

    Scripts are not a package, so they are loaded from their files, once per session. Each is
    registered in sys.modules while the session lasts (dataclasses look their module up by
    name) and removed at the end.
    """
    loaded: list[str] = []

    def load(name: str) -> ModuleType:
        module_name = f"{name}_script"
        if module_name in sys.modules:
            return sys.modules[module_name]
        path = REPO_ROOT / "scripts" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise FileNotFoundError(f"no script at {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        loaded.append(module_name)
        spec.loader.exec_module(module)
        return module

    yield load
    for module_name in loaded:
        sys.modules.pop(module_name, None)
