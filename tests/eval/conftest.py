"""Fixtures of the evaluation tests: hand-built trajectories and a loopback judge server.

The judge server speaks the OpenAI chat-completions protocol on 127.0.0.1. Its verdict is a
pure function of the request, so every test knows the verdicts in advance: a few predicted
answers have fixed replies (``REPLIES``; "boom" gets HTTP 400), any other answer gets "yes"
when it equals a gold alternative (ignoring case) and "no" otherwise.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from grasp.reward import compute_reward
from grasp.rollout.trajectory import Trajectory
from grasp.types import EpisodeEvidence

REPLIES = {
    "Lyon": "No.",
    "dunno": "Probably yes",
    "pondered": "<think>It says Paris.</think>\nYES",
}
"""Fixed judge replies by predicted answer."""
_ANSWER = re.compile(r"^Predicted answer: (.*)$", re.MULTILINE)
_GOLD = re.compile(r"^Gold answer \(alternatives separated by \|\): (.*)$", re.MULTILINE)


@dataclass
class JudgeServer:
    url: str
    bodies: list[dict] = field(default_factory=list)
    """Every request body received, in order."""


def _handler(server: JudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            server.bodies.append(body)
            user = body["messages"][-1]["content"]
            answer = _ANSWER.search(user).group(1)
            if answer == "boom":
                return self._send(400, b'{"error": "bad request"}')
            gold = [g.strip().lower() for g in _GOLD.search(user).group(1).split("|")]
            reply = REPLIES.get(answer, "yes" if answer.lower() in gold else "no")
            completion = {
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ]
            }
            self._send(200, json.dumps(completion).encode())

        def _send(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    state = JudgeServer(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


def make_trajectory(
    episode_id: str,
    answer: str | None,
    gold_answers: tuple[str, ...],
    gold: set[int],
    semantic: set[int] = frozenset(),
    keyword: set[int] = frozenset(),
    read: set[int] = frozenset(),
    turns: list[dict] | None = None,
    tool_calls: dict[str, int] | None = None,
    errors: dict[str, int] | None = None,
    stop_reason: str = "answered",
    dataset: str = "hotpotqa",
) -> Trajectory:
    """A finished episode with the given evidence; its reward is computed for real."""
    turns = turns or [{"text": "", "call": None, "error": None, "observation": None, "hits": []}]
    errors = errors or {}
    evidence = EpisodeEvidence(
        answer=answer,
        gold_answers=gold_answers,
        gold_paragraph_ids=frozenset(gold),
        semantic_paragraph_ids=frozenset(semantic),
        keyword_paragraph_ids=frozenset(keyword),
        read_paragraph_ids=frozenset(read),
        turns_used=len(turns),
        turn_budget=6,
        invalid_turns=sum(errors.values()),
    )
    question_id = episode_id.split("#")[0]
    return Trajectory(
        episode_id=episode_id,
        question_id=question_id,
        dataset=dataset,
        group_id=0,
        sample_index=0,
        question=f"question {question_id}?",
        gold_answers=list(gold_answers),
        gold_paragraph_ids=sorted(gold),
        turns=turns,
        stop_reason=stop_reason,
        answer=answer,
        turns_used=len(turns),
        turn_budget=6,
        semantic_paragraph_ids=sorted(semantic),
        keyword_paragraph_ids=sorted(keyword),
        read_paragraph_ids=sorted(read),
        tool_calls=tool_calls or {},
        errors=errors,
        reward=compute_reward(evidence).as_dict(),
    )


@pytest.fixture
def trajectory():
    """``make_trajectory``: build a finished episode by hand."""
    return make_trajectory
