"""Citation precision and recall against hand-computed values: one answer's scores, their
means over the citing episodes, pooling, the markdown, and a scripted evaluation citing."""

from __future__ import annotations

import dataclasses
import json

import pytest
from evaluate_fixture import compose_config

from grasp.corpus.corpus import SentenceCorpus
from grasp.data.normalized import load_normalized
from grasp.env.episode import Citations
from grasp.eval.citations import (
    CitationScores,
    citation_lines,
    citation_scores,
    citation_summary,
    pool_citations,
)
from grasp.eval.context import read_trajectories
from grasp.eval.ladder import ladder_markdown, ladder_section
from grasp.eval.protocol import evaluate_datasets
from grasp.eval.results import EvaluationResults
from grasp.eval.supporting import supporting_sentences


@pytest.mark.parametrize(
    "cited, supporting, expected",
    [
        ({1, 2, 3}, {2, 3, 4, 5}, (2 / 3, 0.5)),
        ({4}, {4, 5}, (1.0, 0.5)),
        ({4, 5}, {4, 5}, (1.0, 1.0)),
        ({7, 8}, {4}, (0.0, 0.0)),
    ],
)
def test_citation_scores_are_exact(cited, supporting, expected):
    assert citation_scores(cited, supporting) == pytest.approx(CitationScores(*expected))


def test_citation_scores_need_cited_and_supporting_sentences():
    with pytest.raises(ValueError, match="cited and supporting"):
        citation_scores(set(), {1})
    with pytest.raises(ValueError, match="cited and supporting"):
        citation_scores({1}, set())


@pytest.fixture
def five(trajectory):
    """Four answers that could cite (a, b score; c cited none; d's question has no sentence
    facts) and one episode that never answered (e)."""

    def cited(episode_id: str, citations: Citations | None):
        made = trajectory(episode_id, "x", ("y",), {0})
        return dataclasses.replace(made, citations=citations)

    return [
        cited("a#0", Citations((1, 2, 3), invalid=0)),
        cited("b#0", Citations((4,), invalid=0)),
        cited("c#0", Citations((), invalid=0)),
        cited("d#0", Citations((9,), invalid=2)),
        cited("e#0", None),
    ]


SUPPORTING = {"a#0": {2, 3, 4, 5}, "b#0": {4, 5}, "c#0": {1}, "e#0": {1}}


def test_means_over_the_citing_episodes_with_facts(five):
    assert citation_summary(five, SUPPORTING) == pytest.approx(
        {
            "answers": 4,
            "cited_share": 0.75,  # a, b, d
            "invalid": 2,
            "invalid_per_answer": 0.5,
            "scored_episodes": 2,  # a and b: d has no facts, c cited nothing
            "precision": (2 / 3 + 1.0) / 2,
            "recall": (0.5 + 0.5) / 2,
        }
    )


def test_without_recorded_citations_there_is_no_summary_not_zeros(five, trajectory):
    uncited = [dataclasses.replace(t, citations=None) for t in five]
    assert citation_summary(uncited, SUPPORTING) is None
    assert "citations" not in ladder_section(uncited, None, supporting=SUPPORTING)
    assert "citations" not in ladder_section(uncited, None)
    markdown = ladder_markdown("x", {"ladder": ladder_section(uncited, None)})
    assert "cite" not in markdown


def test_no_scored_episode_means_no_precision_or_recall(five):
    summary = citation_summary(five[2:], SUPPORTING)  # c cited none, d has no facts
    assert summary == {
        "answers": 2,
        "cited_share": 0.5,
        "invalid": 2,
        "invalid_per_answer": 1.0,
        "scored_episodes": 0,
    }
    assert citation_lines(summary) == [
        "- answers that cited: 0.500 (2 answers; 1.00 invalid citations per answer)"
    ]


def test_pooling_weighs_by_answers_and_scored_episodes(five):
    first = citation_summary(five, SUPPORTING)
    second = {  # 2 answers, one citing, scored 1.0/1.0
        "answers": 2,
        "cited_share": 0.5,
        "invalid": 0,
        "invalid_per_answer": 0.0,
        "scored_episodes": 1,
        "precision": 1.0,
        "recall": 1.0,
    }
    assert pool_citations([first, second]) == pytest.approx(
        {
            "answers": 6,
            "cited_share": (0.75 * 4 + 0.5 * 2) / 6,
            "invalid": 2,
            "invalid_per_answer": 2 / 6,
            "scored_episodes": 3,
            "precision": (5 / 6 * 2 + 1.0) / 3,
            "recall": (0.5 * 2 + 1.0) / 3,
        }
    )
    unscored = {**second, "scored_episodes": 0}
    del unscored["precision"], unscored["recall"]
    assert "precision" not in pool_citations([unscored])
    assert pool_citations([]) is None


def test_the_ladder_holds_and_shows_citations(five):
    section = ladder_section(five, None, supporting=SUPPORTING)
    assert section["citations"] == citation_summary(five, SUPPORTING)
    markdown = ladder_markdown("hotpotqa", {"ladder": section})
    assert "- answers that cited: 0.750 (4 answers; 0.50 invalid citations per answer)" in markdown
    assert (
        "- citation precision: 0.833, recall: 0.500 (2 citing episodes with sentence-level facts)"
        in markdown
    )


def test_a_scripted_evaluation_cites_and_reports_citations(scripted, data_dir, tmp_path):
    out = tmp_path / "eval"
    overrides = [*scripted, "n=2", "datasets=[2wikimultihopqa,musique]", "env.citations=true"]
    results = evaluate_datasets(compose_config(*overrides, f"out={out}"))
    for name in ("2wikimultihopqa", "musique"):
        trajectories = read_trajectories(out / name)
        answered = [t for t in trajectories if t.stop_reason == "answered"]
        assert answered and all(t.citations is not None for t in answered)
        for t in answered:  # the scripted agent cites sentence hits it was shown, all valid
            shown = {h["sentence_id"] for turn in t.turns for h in turn.hits}
            assert t.citations.sentence_ids and set(t.citations.sentence_ids) <= shown
            assert t.citations.invalid == 0
        citations = results.datasets[name].ladder["citations"]
        assert citations["answers"] == len(answered) and citations["cited_share"] == 1.0
        written = json.loads((out / name / "results.json").read_text())["ladder"]["citations"]
        assert written == citations
        assert "- answers that cited: 1.000" in (out / name / "results.md").read_text()
    twowiki = results.datasets["2wikimultihopqa"].ladder["citations"]
    questions = load_normalized(data_dir / "2wikimultihopqa" / "dev.jsonl")
    corpus = SentenceCorpus.from_questions(questions)  # the index's corpus: the whole file
    by_id = {q.question_id: q for q in questions}
    scores = [
        citation_scores(
            set(t.citations.sentence_ids),
            supporting_sentences(corpus, by_id[t.question_id]).sentence_ids,
        )
        for t in read_trajectories(out / "2wikimultihopqa")
    ]
    assert twowiki["scored_episodes"] == len(scores) == 2
    assert twowiki["precision"] == pytest.approx(sum(s.precision for s in scores) / 2)
    assert twowiki["recall"] == pytest.approx(sum(s.recall for s in scores) / 2)
    musique = results.datasets["musique"].ladder["citations"]
    assert "precision" not in musique  # no sentence-level facts: not scored, not 0.0
    pooled = results.overall.pooled.ladder["citations"]
    assert pooled["answers"] == twowiki["answers"] + musique["answers"]
    assert pooled["precision"] == twowiki["precision"] and pooled["scored_episodes"] == 2
    assert "- citation precision: " in (out / "results.md").read_text()
    written = json.loads((out / "results.json").read_text())
    assert EvaluationResults.from_json(written).to_json() == written
