"""Shared fixtures: a tiny hand-written corpus whose real indexes build in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

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
