"""The evaluation protocol (``grasp.eval.protocol``, scripts/evaluate.py's work) under faults:
two writers of one folder, repeated lines, a failing backend.

The scripted agent acts where no model is needed; the generation-error tests use the openai
policy against a loopback chat-completions stub that fails (HTTP 503) for chosen questions.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler

import pytest
from evaluate_fixture import compose_config

from grasp.eval.policy_eval import check_or_write_config
from grasp.eval.protocol import evaluate_datasets
from grasp.paths import REPO_ROOT


def test_a_folder_another_evaluation_is_writing_is_refused(scripted, tmp_path):
    """Issue 18 §5 item 4: two processes on one out= must not both append trajectories."""
    out = tmp_path / "eval"
    folder = out / "hotpotqa"
    folder.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from grasp.eval.resume import locked\n"
            f"with locked(Path({str(folder)!r})):\n"
            "    print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert holder.stdout.readline() == "held\n"
        overrides = [*scripted, "datasets=[hotpotqa]", f"out={out}"]
        with pytest.raises(RuntimeError, match="being written by another evaluation") as caught:
            evaluate_datasets(compose_config(*overrides))
        assert f"pid {holder.pid} on " in str(caught.value)
        assert not (folder / "trajectories.jsonl").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    results = evaluate_datasets(compose_config(*overrides))  # the holder is gone: the lock with it
    assert results.datasets["hotpotqa"].episodes == 3


def test_a_repeated_trajectory_line_counts_once(scripted, tmp_path):
    """Issue 18 §5 item 4: a duplicated line must not change the results, nor crash pooling."""
    out = tmp_path / "eval"
    overrides = [*scripted, "datasets=[hotpotqa,musique]", f"out={out}"]
    first = evaluate_datasets(compose_config(*overrides))
    path = out / "hotpotqa" / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    repeat = json.loads(lines[0])
    repeat["answer"] = "a different answer"  # a repeat that differs: the first line counts
    repeat["reward"]["answer/f1"] = 1.0
    path.write_text("\n".join([*lines, lines[1], json.dumps(repeat)]) + "\n")
    again = evaluate_datasets(compose_config(*overrides))
    hotpotqa = again.datasets["hotpotqa"]
    assert hotpotqa.episodes == hotpotqa.questions == 3
    assert hotpotqa.repeated_lines_dropped == 2
    assert hotpotqa.questions_rolled_out == 0
    assert hotpotqa.f1 == first.datasets["hotpotqa"].f1
    assert again.overall.pooled.episodes == 6
    assert again.overall.pooled.f1 == first.overall.pooled.f1


class ChatStub:
    """A chat-completions server: answers "Google" with the answer tool, or HTTP 503 for any
    question containing one of ``failing`` (Retry-After 0, so the client's retries are quick)."""

    def __init__(self, failing: tuple[str, ...]) -> None:
        self.failing = failing
        self.requests = 0
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    stub.requests += 1
                text = json.dumps(body["messages"])
                if any(word in text for word in stub.failing):
                    return self._send(503, {"error": "overloaded"})
                call = {"name": "answer", "arguments": json.dumps({"answer": "Google"})}
                message = {"role": "assistant", "content": "", "tool_calls": [{"function": call}]}
                choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
                self._send(200, {"choices": [choice]})

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(data)

        return Handler


def openai_overrides(scripted: list[str], url: str, out) -> list[str]:
    return [
        *scripted[1:],
        "policy=openai",
        f"policy.base_url={url}",
        "policy.served_model=stub",
        "datasets=[hotpotqa]",
        f"out={out}",
    ]


def test_generation_errors_are_retried_on_resume(scripted, loopback, tmp_path):
    """Issue 18 §5 item 6: a failed generation is not an answer; the next run retries it."""
    out = tmp_path / "eval"
    stub = ChatStub(failing=("Python",))  # one question of three
    with loopback(stub.handler()) as url:
        first = evaluate_datasets(compose_config(*openai_overrides(scripted, url, out)))
        hotpotqa = first.datasets["hotpotqa"]
        assert hotpotqa.generation_errors == 1
        assert hotpotqa.stop_reasons == {"answered": 2 / 3, "generation_error": 1 / 3}
        lines = [json.loads(x) for x in (out / "hotpotqa" / "trajectories.jsonl").open()]
        failed = [t for t in lines if t["stop_reason"] == "generation_error"]
        assert [t["question_id"] for t in failed] == ["hotpotqa-q-python"]
        assert failed[0]["extra"]["generation_error"].startswith("_Retryable: HTTP 503")
        stub.failing = ()  # the server is fixed
        again = evaluate_datasets(compose_config(*openai_overrides(scripted, url, out)))
    retried = again.datasets["hotpotqa"]
    assert retried.questions_rolled_out == 1
    assert retried.generation_errors == 0 and retried.episodes == 3
    assert retried.stop_reasons == {"answered": 1.0}
    assert retried.em == 1 / 3  # "Google" is the gold answer of the Python question only
    assert len((out / "hotpotqa" / "trajectories.jsonl").read_text().splitlines()) == 4


def test_an_evaluation_whose_generations_mostly_fail_fails(scripted, loopback, tmp_path):
    """Issue 18 §5 item 6 and issue 14 finding 14: no score is reported over failed episodes."""
    out = tmp_path / "eval"
    stub = ChatStub(failing=("Python", "Everest"))  # two questions of three
    with loopback(stub.handler()) as url:
        with pytest.raises(RuntimeError, match=r"2 of 3 episodes ended in a generation error"):
            evaluate_datasets(compose_config(*openai_overrides(scripted, url, out)))
    assert not (out / "hotpotqa" / "results.json").exists()
    assert not (out / "results.json").exists()


def test_nothing_listening_at_the_policy_url_exits_non_zero(data_dir, index_root, tmp_path):
    """Issue 18 §5 item 6: every episode fails to generate, so the command must fail."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # bound, never listening: every connection is refused
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    command = [
        sys.executable,
        str(REPO_ROOT / "scripts" / "evaluate.py"),
        *openai_overrides(
            [None, f"data_dir={data_dir}", f"index_root={index_root}"], url, tmp_path / "eval"
        ),
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
    finally:
        sock.close()
    assert done.returncode != 0
    assert "3 of 3 episodes ended in a generation error" in done.stdout + done.stderr
    assert "ConnectionError" in done.stdout + done.stderr


def test_a_cut_short_config_is_named_and_left_alone(tmp_path):
    """Issue 18 §5 item 11: a truncated config.json is a clear error, not a JSONDecodeError."""
    path = tmp_path / "config.json"
    config = {"n": 12, "seed": 42}
    check_or_write_config(path, config)
    assert json.loads(path.read_text()) == config
    check_or_write_config(path, config)  # the same configuration: accepted
    cut = path.read_text()[:10]
    path.write_text(cut)
    with pytest.raises(ValueError, match=r"config.json is not an evaluation's configuration \("):
        check_or_write_config(path, config)
    assert path.read_text() == cut
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"\(it holds a list\): it was cut short or edited"):
        check_or_write_config(path, config)


def test_a_folder_written_before_a_field_existed_resumes_at_the_value_it_ran_with(tmp_path):
    """env.citations was added after folders were written: off, they resume; on, refused."""
    path = tmp_path / "config.json"
    check_or_write_config(path, {"n": 12, "env": {"top_k": 5}})
    check_or_write_config(path, {"n": 12, "env": {"top_k": 5, "citations": False}})
    assert json.loads(path.read_text()) == {"n": 12, "env": {"top_k": 5}}  # left as it was
    with pytest.raises(ValueError, match=r"another configuration \(env\.citations differ"):
        check_or_write_config(path, {"n": 12, "env": {"top_k": 5, "citations": True}})
    with pytest.raises(ValueError, match=r"\(env\.top_k differ"):  # a recorded field differs
        check_or_write_config(path, {"n": 12, "env": {"top_k": 4, "citations": False}})


def test_config_json_is_never_half_written(tmp_path, monkeypatch):
    """Issue 18 §5 item 11: killed while writing, the folder has no config.json, not half of
    one (the kill is simulated where the finished temporary file would replace it)."""
    path = tmp_path / "config.json"

    def killed(*args) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        check_or_write_config(path, {"n": 12})
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    check_or_write_config(path, {"n": 12})
    assert json.loads(path.read_text()) == {"n": 12}


def test_every_input_is_checked_before_the_first_evaluation(data_dir, index_root, tmp_path):
    """Issue 18 §5 item 16: a later dataset's missing file fails before the first runs."""
    partial = tmp_path / "data"
    (partial / "hotpotqa").mkdir(parents=True)
    shutil.copy(data_dir / "hotpotqa" / "dev.jsonl", partial / "hotpotqa" / "dev.jsonl")
    out = tmp_path / "eval"
    overrides = [
        "policy=scripted",
        f"data_dir={partial}",
        f"index_root={index_root}",
        "datasets=[hotpotqa,musique]",
        f"out={out}",
    ]
    with pytest.raises(FileNotFoundError, match=str(partial / "musique" / "dev.jsonl")):
        evaluate_datasets(compose_config(*overrides))
    assert not out.exists()
