"""scripts/evaluate.py's work (``grasp.eval.protocol``) on the tiny fixture questions, written
as three datasets' dev files.

The heuristic search agent acts (no model); each dataset gets its own real index (MiniLM,
FAISS, bm25s) under a temporary folder. The config is composed from configs/evaluate.yaml with
command-line overrides, as the script composes it.
"""

from __future__ import annotations

import json
import lzma
import subprocess

import pytest
from evaluate_fixture import DATASETS, compose_config

from grasp.compressed import read_text
from grasp.eval.context import read_trajectories
from grasp.eval.paired import compare_folders
from grasp.eval.policy_eval import compress_finished
from grasp.eval.protocol import evaluate_datasets
from grasp.paths import REPO_ROOT
from grasp.report.load import load_run


def test_default_protocol_is_three_datasets_500_questions_seed_42():
    config = compose_config()
    assert config.datasets == list(DATASETS)
    assert (config.n, config.seed, config.split, config.dataset) == (500, 42, "dev", None)
    assert config.judge.kind == "none" and config.policy.kind == "scripted"


def test_three_datasets_in_one_command(scripted, tmp_path):
    out = tmp_path / "eval"
    overrides = [*scripted, "n=2"]
    results = evaluate_datasets(compose_config(*overrides, f"out={out}"))
    assert list(results.datasets) == list(DATASETS)
    for name in DATASETS:
        folder = out / name
        trajectories = (folder / "trajectories.jsonl").read_text().splitlines()
        assert len(trajectories) == 2  # n=2 of 3, seeded
        assert {json.loads(line)["dataset"] for line in trajectories} == {name}
        per_dataset = json.loads((folder / "results.json").read_text())
        assert per_dataset["jd"] == "not computed" and per_dataset["episodes"] == 2
        assert per_dataset["config"]["dataset"]["name"] == name
        assert (folder / "results.md").read_text().startswith(f"# Evaluation of {name}")
        assert not (folder / "judge_cache.jsonl").exists()
    datasets = results.datasets
    assert datasets["hotpotqa"].supporting_sentence_recall == "not available"
    assert datasets["musique"].supporting_sentence_recall == "not available"
    assert 0.0 <= datasets["2wikimultihopqa"].supporting_sentence_recall <= 1.0
    pooled, macro = results.overall.pooled, results.overall.macro
    assert pooled.episodes == results.questions == 6
    assert pooled.em == pytest.approx(sum(d.em for d in datasets.values()) / 3)
    assert macro.means["f1"].mean == pytest.approx(sum(d.f1 for d in datasets.values()) / 3)
    assert pooled.jd == macro.means["jd"] == "not computed"
    assert macro.datasets["supporting_sentence_recall"] == ["2wikimultihopqa"]
    for part in (*datasets.values(), pooled):  # every question's type is known: EM by kind
        assert part.comparison_episodes + part.other_episodes == part.episodes
        assert 0.0 <= part.containment <= 1.0 and part.reads_run_per_episode is not None
    assert results.provenance["policy"] == {"kind": "scripted", "scripted_reads": 2}
    assert results.provenance["judge"] == {"kind": "none"}
    head = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    if head.returncode == 0:
        assert results.provenance["code"]["git_commit"] == head.stdout.strip()
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["overall"]["pooled"]["em"] == pooled.em
    table = (out / "results.md").read_text().splitlines()
    labels = [line.split(" | ")[0] for line in table if line.startswith("| ")]
    for label in (*DATASETS, "overall (pooled)", "overall (macro)"):
        assert f"| {label}" in labels
    assert "- policy: kind=scripted, scripted_reads=2" in table

    written = {name: (out / name / "results.json").read_bytes() for name in DATASETS}
    again = evaluate_datasets(compose_config(*overrides, f"out={out}"))  # resumes: nothing to do
    assert again.datasets == datasets  # the finished datasets' results stand, as written
    assert {name: (out / name / "results.json").read_bytes() for name in DATASETS} == written
    assert again.overall.pooled.em == pooled.em
    with pytest.raises(ValueError, match=r"another configuration \(env\.top_k differ"):
        evaluate_datasets(compose_config(*overrides, f"out={out}", "env.top_k=3"))


def test_openai_judge_is_cached_across_a_resumed_evaluation(scripted, tmp_path, judge_server):
    overrides = [
        *scripted,
        "datasets=[hotpotqa,musique]",
        f"out={tmp_path / 'eval'}",
        "judge=openai",
        f"judge.base_url={judge_server.url}",
        "judge.served_model=stub-judge",
    ]
    first = evaluate_datasets(compose_config(*overrides))
    answered = [
        json.loads(row)["answer"]
        for name in ("hotpotqa", "musique")
        for row in (tmp_path / "eval" / name / "trajectories.jsonl").read_text().splitlines()
    ]
    assert len(answered) == 6 and all(answered)  # three questions each, every one answered
    assert len(judge_server.bodies) == 6  # one request per (question, answer)
    for name in ("hotpotqa", "musique"):
        result = first.datasets[name]
        # The stub says yes exactly when the answer is a gold answer: JD equals EM here.
        assert result.jd == result.em
        assert sum(result.judge.values()) == 3
    assert first.provenance["judge"]["prompt_version"] == "v1"
    again = evaluate_datasets(compose_config(*overrides))
    assert len(judge_server.bodies) == 6, "a resumed evaluation judges nothing twice"
    assert again.overall.pooled.jd == first.overall.pooled.jd
    assert isinstance(first.overall.macro.means["jd"].mean, float)


def test_single_dataset_form_reads_its_own_path(data_dir, index_root, tmp_path):
    path = data_dir / "musique" / "dev.jsonl"
    config = compose_config(
        "dataset=musique", f"dataset.path={path}", f"index_root={index_root}", f"out={tmp_path}"
    )
    assert [d.name for d in config.dataset_configs()] == ["musique"]
    results = evaluate_datasets(config)
    assert list(results.datasets) == ["musique"]
    written = json.loads((tmp_path / "musique" / "results.json").read_text())
    assert written["config"]["dataset"]["path"] == str(path)
    assert "overall (macro)" not in (tmp_path / "results.md").read_text()


def test_an_evaluation_is_not_resumed_over_an_edited_dataset_file(data_dir, index_root, tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text((data_dir / "musique" / "dev.jsonl").read_text())
    overrides = ("dataset=musique", f"dataset.path={path}", f"index_root={index_root}")
    evaluate_datasets(compose_config(*overrides, f"out={tmp_path / 'eval'}"))
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first["answers"] = ["another answer"]  # same passages, so the same index; other gold
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=r"\(dataset\.sha256 differ"):
        evaluate_datasets(compose_config(*overrides, f"out={tmp_path / 'eval'}"))


def test_a_torn_last_trajectory_is_rolled_out_again_and_corruption_is_named(scripted, tmp_path):
    out = tmp_path / "eval"
    overrides = [
        *scripted,
        "datasets=[hotpotqa]",
        f"out={out}",
    ]
    first = evaluate_datasets(compose_config(*overrides))
    path = out / "hotpotqa" / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    # Killed while appending the third line: half of it reached the disk.
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2])
    again = evaluate_datasets(compose_config(*overrides))
    assert again.datasets["hotpotqa"].questions_rolled_out == 1
    rewritten = path.read_text().splitlines()
    assert rewritten[:2] == lines[:2] and len(rewritten) == 3  # the torn line replaced
    # The same question again (alone in its batch now, so its group id and the last bits of
    # its dense scores may differ), with the same calls and answer.
    torn, redone = json.loads(lines[2]), json.loads(rewritten[2])
    assert redone["question_id"] == torn["question_id"] and redone["answer"] == torn["answer"]
    assert [t["text"] for t in redone["turns"]] == [t["text"] for t in torn["turns"]]
    assert again.overall.pooled.em == first.overall.pooled.em
    # A whole last line without its newline is kept, and the next append starts a new line.
    path.write_text("\n".join(rewritten[:2]))
    evaluate_datasets(compose_config(*overrides))
    assert path.read_text().splitlines()[:2] == rewritten[:2]
    assert len(path.read_text().splitlines()) == 3
    # A bad line before the end is corruption: named, and nothing is overwritten.
    corrupted = lines[0] + "\n{broken\n" + lines[2] + "\n"
    path.write_text(corrupted)
    with pytest.raises(ValueError, match=r"trajectories.jsonl: line 2 is not a trajectory"):
        evaluate_datasets(compose_config(*overrides))
    assert path.read_text() == corrupted


def test_a_resumed_evaluation_reports_the_time_of_every_run(scripted, tmp_path):
    out = tmp_path / "eval"
    overrides = [
        *scripted,
        "datasets=[hotpotqa]",
        "batch_questions=1",
        f"out={out}",
    ]
    evaluate_datasets(compose_config(*overrides))
    folder = out / "hotpotqa"
    trajectories = (folder / "trajectories.jsonl").read_text().splitlines()
    logged = [json.loads(line) for line in (folder / "rollout_log.jsonl").read_text().splitlines()]
    assert [entry["question_ids"] for entry in logged] == [
        [json.loads(line)["question_id"]] for line in trajectories
    ]
    assert len({entry["run"] for entry in logged}) == 1
    # Killed during the last batch: neither its trajectory nor its time reached the disk.
    (folder / "trajectories.jsonl").write_text("\n".join(trajectories[:2]) + "\n")
    (folder / "rollout_log.jsonl").write_text(
        "".join(json.dumps(entry) + "\n" for entry in logged[:2])
    )
    again = evaluate_datasets(compose_config(*overrides))
    resumed = again.datasets["hotpotqa"]
    relogged = [
        json.loads(line) for line in (folder / "rollout_log.jsonl").read_text().splitlines()
    ]
    assert relogged[:2] == logged[:2] and len(relogged) == 3
    assert relogged[2]["run"] != logged[0]["run"]
    assert resumed.questions_rolled_out == 1
    assert resumed.questions_timed == resumed.questions == 3
    assert resumed.rollout_runs == 2
    assert resumed.rollout_code == [again.provenance["code"]]  # both runs: this checkout
    assert resumed.wall_time_s == pytest.approx(sum(entry["wall_s"] for entry in relogged))
    assert resumed.wall_time_per_question_s == pytest.approx(resumed.wall_time_s / 3)
    # Killed after writing the last trajectory, before its time (mid-line): that question is
    # kept but untimed, and the next run's line does not run into the torn one.
    torn = json.dumps(relogged[2])
    (folder / "rollout_log.jsonl").write_text(
        "".join(json.dumps(entry) + "\n" for entry in relogged[:2]) + torn[: len(torn) // 2]
    )
    again = evaluate_datasets(compose_config(*overrides))
    untimed = again.datasets["hotpotqa"]
    assert untimed.questions_rolled_out == 0
    assert untimed.questions_timed == 2 and untimed.rollout_runs == 1
    assert untimed.wall_time_s == pytest.approx(sum(entry["wall_s"] for entry in relogged[:2]))
    assert again.overall.pooled.questions_timed == 2
    text = (folder / "rollout_log.jsonl").read_text()
    assert text.endswith(torn[: len(torn) // 2] + "\n")  # ended, so the next append is whole


def test_a_finished_dataset_keeps_the_code_version_that_produced_it(
    scripted, tmp_path, judge_server
):
    out = tmp_path / "eval"
    overrides = [*scripted, "n=2", "datasets=[hotpotqa,musique]", f"out={out}"]
    evaluate_datasets(compose_config(*overrides))
    path = out / "hotpotqa" / "results.json"
    earlier = json.loads(path.read_text())
    earlier["provenance"]["code"] = {"git_commit": "0" * 40, "dirty": False}  # an older commit
    earlier["scoring_time_s"] = 12.5
    path.write_text(json.dumps(earlier, indent=2))
    (out / "musique" / "results.json").write_text('{"em": 0.5')  # cut short: rewritten
    markdown = (out / "hotpotqa" / "results.md").read_text()

    again = evaluate_datasets(compose_config(*overrides))
    assert json.loads(path.read_text()) == earlier
    assert (out / "hotpotqa" / "results.md").read_text() == markdown
    assert again.datasets["hotpotqa"].scoring_time_s == 12.5
    rewritten = json.loads((out / "musique" / "results.json").read_text())
    assert rewritten["provenance"]["code"] == again.provenance["code"]
    assert rewritten["episodes"] == 2 and rewritten["questions_rolled_out"] == 0

    # Another judge is another result: the finished dataset is scored again and rewritten.
    judged = ["judge=openai", f"judge.base_url={judge_server.url}", "judge.served_model=stub"]
    third = evaluate_datasets(compose_config(*overrides, *judged))
    rescored = json.loads(path.read_text())
    assert (
        rescored["provenance"] == third.provenance
        and rescored["jd"] == third.datasets["hotpotqa"].jd
    )
    assert isinstance(rescored["jd"], float) and len(judge_server.bodies) == 4


def test_a_stored_evaluation_reads_as_written_and_resumes_from_its_xz(scripted, tmp_path):
    out = tmp_path / "eval"
    overrides = [*scripted, "datasets=[hotpotqa]", f"out={out}"]
    first = evaluate_datasets(compose_config(*overrides, "n=2"))
    folder = out / "hotpotqa"
    plain = (folder / "trajectories.jsonl").read_text()
    results = (folder / "results.json").read_bytes()
    assert compress_finished(out) == [folder / "trajectories.jsonl.xz"]
    packed = (folder / "trajectories.jsonl.xz").read_bytes()
    # Every reader of a finished evaluation reads the stored form as the plain one.
    assert [t.to_json() for t in read_trajectories(folder)] == [
        json.loads(line) for line in plain.splitlines()
    ]
    assert len(load_run(folder).evaluations[0].trajectories) == 2
    em = compare_folders(out, out).pooled["em"]
    assert (em.mean_a, em.a_higher, em.b_higher) == (em.mean_b, 0, 0)
    # A rerun with nothing to do leaves the stored file and the results as they are.
    again = evaluate_datasets(compose_config(*overrides, "n=2"))
    assert again.datasets == first.datasets
    assert (folder / "trajectories.jsonl.xz").read_bytes() == packed
    assert (folder / "results.json").read_bytes() == results
    assert not (folder / "trajectories.jsonl").exists()
    # A question left to roll out (here: its line missing from the stored file): the file
    # becomes plain again, keeps its lines and appends the new one.
    kept = plain.splitlines()[:1]
    (folder / "trajectories.jsonl.xz").write_bytes(lzma.compress((kept[0] + "\n").encode()))
    resumed = evaluate_datasets(compose_config(*overrides, "n=2"))
    assert resumed.datasets["hotpotqa"].questions_rolled_out == 1
    assert not (folder / "trajectories.jsonl.xz").exists()
    lines = (folder / "trajectories.jsonl").read_text().splitlines()
    assert lines[0] == kept[0] and len(lines) == 2
    assert json.loads(lines[1])["question_id"] == json.loads(plain.splitlines()[1])["question_id"]


def test_compress_finished_skips_unfinished_folders_and_a_bad_stored_line_is_named(
    scripted, tmp_path
):
    out = tmp_path / "eval"
    overrides = [*scripted, "datasets=[hotpotqa]", f"out={out}", "n=2"]
    evaluate_datasets(compose_config(*overrides))
    running = out / "musique"
    running.mkdir()
    (running / "trajectories.jsonl").write_text("{}\n")  # no results.json yet: not finished
    assert compress_finished(out) == [out / "hotpotqa" / "trajectories.jsonl.xz"]
    assert (running / "trajectories.jsonl").read_text() == "{}\n"
    # A stored file is never cut: a bad last line in it is corruption, not a torn write.
    stored = out / "hotpotqa" / "trajectories.jsonl.xz"
    lines = read_text(stored).splitlines()
    broken = lzma.compress(("\n".join(lines[:1]) + "\n{broken").encode())
    stored.write_bytes(broken)
    with pytest.raises(ValueError, match=r"trajectories.jsonl.xz: line 2 is not a trajectory"):
        evaluate_datasets(compose_config(*overrides))
    assert stored.read_bytes() == broken
