"""results.md: the header names what produced the results; the tables hold the exact cells."""

from __future__ import annotations

import dataclasses

import pytest

from grasp.eval.judge import JudgeResult, Verdict
from grasp.eval.results import PooledResults
from grasp.eval.summary import EpisodeScores, overall_summary, summarize
from grasp.eval.tables import format_interval, results_markdown

PROVENANCE = {
    "code": {"git_commit": "0123abc", "git_dirty": True},
    "policy": {"kind": "hf", "model": {"name": "Qwen/Qwen2.5-3B-Instruct", "revision": "aa11"}},
    "judge": {"kind": "openai", "served_model": "judge-7b", "prompt_version": "v1"},
}
CONFIG = {
    "split": "dev",
    "n": 500,
    "seed": 42,
    "env": {
        "tools": ["semantic_search", "answer"],
        "top_k": 5,
        "turn_budget": 6,
        "scope": "pooled",
    },
}


@pytest.fixture
def parts(trajectory):
    hotpot = [
        trajectory("h1#0", "Rome", ("Rome",), {1}, semantic={1}, tool_calls={"semantic_search": 1}),
        trajectory("h2#0", "Oslo", ("Oslo",), {2}, semantic={2}, tool_calls={"semantic_search": 1}),
    ]
    musique = [trajectory("m1#0", "Bonn", ("Rome",), {3}, dataset="musique")]
    hotpot_scores = EpisodeScores(
        supporting_recall={"h1#0": 1.0},
        supporting_all_found={"h1#0": 1.0},
        verdicts={
            "h1#0": JudgeResult(Verdict.CORRECT, "yes"),
            "h2#0": JudgeResult(Verdict.UNPARSEABLE, "sure"),
        },
        question_types={"h1#0": "comparison", "h2#0": "bridge"},
    )
    musique_scores = EpisodeScores(
        verdicts={"m1#0": JudgeResult(Verdict.WRONG, "no")}, question_types={"m1#0": "2hop"}
    )
    return {"hotpotqa": (hotpot, hotpot_scores), "musique": (musique, musique_scores)}


def test_format_interval():
    assert format_interval(0.41234, {"low": 0.3, "high": 0.5}) == "0.412 [0.300, 0.500]"
    assert format_interval({"mean": 0.5, "low": 0.25, "high": 0.75}, None) == "0.500 [0.250, 0.750]"
    assert format_interval("not computed", None) == "not computed"
    assert format_interval(2.0, None) == "2.000"


def test_header_states_policy_checkpoint_judge_commit_and_protocol(parts):
    rows = [(name, summarize(*part)) for name, part in parts.items()]
    text = results_markdown("Evaluation: policy hf", rows, PROVENANCE, CONFIG)
    lines = text.splitlines()
    assert lines[0] == "# Evaluation: policy hf"
    assert "- policy: kind=hf, model.name=Qwen/Qwen2.5-3B-Instruct, model.revision=aa11" in lines
    assert "- judge: kind=openai, served_model=judge-7b, prompt_version=v1" in lines
    assert "- code: git 0123abc (with uncommitted changes)" in lines
    assert (
        "- protocol: split dev, n=500 per dataset (seed 42; all questions where fewer), "
        "tools [semantic_search, answer], top-K 5, turn budget 6, scope pooled"
    ) in lines


def test_quality_rows_hold_means_intervals_and_counts(parts):
    summaries = {name: summarize(*part) for name, part in parts.items()}
    overall = overall_summary(parts)
    rows = [*summaries.items(), ("overall (pooled)", overall.pooled)]
    text = results_markdown("t", rows, PROVENANCE, CONFIG, overall.macro)
    lines = text.splitlines()
    header = (
        "|  | questions | EM | F1 | JD | EM comparison | EM other | containment | recall "
        "| all gold | read recall | SS recall | turns |"
    )
    assert header in lines
    # hotpotqa: EM 1 and recall 1 for both; JD over the one parseable verdict; SS over h1 only;
    # one comparison question and one other, each exact.
    assert (
        "| hotpotqa | 2 | 1.000 [1.000, 1.000] | 1.000 [1.000, 1.000] | 1.000 [1.000, 1.000] (n=1) "
        "| 1.000 [1.000, 1.000] (n=1) | 1.000 [1.000, 1.000] (n=1) | 1.000 [1.000, 1.000] "
        "| 1.000 [1.000, 1.000] | 1.000 [1.000, 1.000] | 0.000 [0.000, 0.000] "
        "| 1.000 [1.000, 1.000] (n=1) | 1.000 [1.000, 1.000] |"
    ) in lines
    assert (
        "| musique | 1 | 0.000 [0.000, 0.000] | 0.000 [0.000, 0.000] | 0.000 [0.000, 0.000] "
        "| not available | 0.000 [0.000, 0.000] | 0.000 [0.000, 0.000] "
        "| 0.000 [0.000, 0.000] | 0.000 [0.000, 0.000] | 0.000 [0.000, 0.000] "
        "| not available | 1.000 [1.000, 1.000] |"
    ) in lines
    pooled = next(line for line in lines if line.startswith("| overall (pooled) | 3 | "))
    assert "0.667 [" in pooled.split(" | ")[2]  # EM 2 of 3
    macro = next(line for line in lines if line.startswith("| overall (macro) | 2 datasets | "))
    assert macro.split(" | ")[2].startswith("0.500 [")  # EM (1 + 0) / 2
    assert macro.split(" | ")[5] == "1.000 [1.000, 1.000]"  # EM comparison: hotpotqa only
    assert macro.split(" | ")[6].startswith("0.500 [")  # EM other: (1 + 0) / 2
    assert macro.split(" | ")[11] == "1.000 [1.000, 1.000]"  # SS recall: hotpotqa only


def test_cost_table_lists_tools_errors_unparseable_verdicts_and_stops(parts):
    """Issue 18 §4: costs that were not measured read "not recorded", not 0 or nan."""
    hotpot, scores = parts["hotpotqa"]
    counted = [dataclasses.replace(t, prompt_tokens=900, generated_tokens=41) for t in hotpot]
    timed = PooledResults(  # a summary with its wall time (a bare summary has none)
        **summarize(counted, scores).summary_fields(),
        wall_time_s=0.5,
        questions_rolled_out=2,
        questions_timed=2,
        wall_time_per_question_s=0.25,
    )
    rows = [("hotpotqa", timed), ("musique", summarize(*parts["musique"]))]
    text = results_markdown("t", rows, PROVENANCE, CONFIG)
    lines = text.splitlines()
    assert (
        "|  | semantic_search | reads ran / refused | parse errors / turn | refused calls / turn "
        "| JD unparseable / failed | stop reasons | generated tokens | wall s / question |"
    ) in lines
    assert (
        "| hotpotqa | 1.00 | 0.00 / 0.00 | 0.000 | 0.000 | 1 / 0 | answered 1.00 | 41 | 0.250 |"
    ) in lines
    assert (
        "| musique | 0.00 | 0.00 / 0.00 | 0.000 | 0.000 | 0 / 0 | answered 1.00 | not recorded "
        "| not recorded |"
    ) in lines


def test_results_written_before_em_by_kind_and_reads_say_not_recorded(trajectory):
    older = dataclasses.replace(
        summarize([trajectory("a#0", "Rome", ("Rome",), {1})]),
        em_comparison=None,
        em_other=None,
        containment=None,
        reads_run_per_episode=None,
        reads_refused_per_episode=None,
    )
    lines = results_markdown("t", [("hotpotqa", older)], {}, {}).splitlines()
    quality, cost = [line for line in lines if line.startswith("| hotpotqa |")]
    assert quality.split(" | ")[5:8] == ["not recorded"] * 3
    assert cost.split(" | ")[1] == "not recorded"


def test_without_judge_the_jd_cells_say_not_computed(trajectory):
    rows = [("hotpotqa", summarize([trajectory("a#0", "Rome", ("Rome",), {1})]))]
    text = results_markdown("t", rows, {}, {})
    row = next(line for line in text.splitlines() if line.startswith("| hotpotqa |"))
    assert row.split(" | ")[4] == "not computed"
    assert "- policy: not recorded" in text and "- code: git unknown (not a git checkout)" in text
