"""Shared fixtures: a tiny hand-written corpus whose real indexes build in seconds, the
scripts loaded as modules, and a loopback LLM-judge server.

Under pytest-xdist (``make test`` runs ``-n 2``) each worker keeps to one core of its own
(``pytest_configure``): its torch threads, and the scripts it starts (which inherit the
affinity and count it as their cores), so that two workers never share a core: two torch
processes on the same 2 cores each run several times slower than alone.

The judge server speaks the OpenAI chat-completions protocol on 127.0.0.1. Its verdict is a
pure function of the request, so every test knows the verdicts in advance: a few predicted
answers have fixed replies (``REPLIES``; "boom" gets HTTP 400), any other answer gets "yes"
when it equals a gold alternative (ignoring case) and "no" otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from grasp.data import write_normalized
from grasp.env.episode import TurnRecord
from grasp.reward import compute_reward
from grasp.rollout.trajectory import Trajectory
from grasp.types import (
    DatasetName,
    EpisodeEvidence,
    Paragraph,
    Question,
    StopReason,
    SupportingFact,
)


def pytest_configure(config: pytest.Config) -> None:
    """Pin an xdist worker (gw0, gw1...) to one core, torch to one thread on it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    core = cores[int(worker.removeprefix("gw")) % len(cores)]
    os.sched_setaffinity(0, {core})
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)


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
def smollm2_fp32():
    """The real SmolLM2-135M-Instruct in float32, loaded once for every test that only reads
    it (generation, templates): tests that train or wrap a model load their own."""
    from grasp.models import ModelConfig, load_policy_model

    return load_policy_model(ModelConfig(dtype="float32"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 64-wide Llama saved with the (Qwen2.5-templated) SmolLM2 tokenizer."""
    import torch
    from tiny_llama import tiny_llama_config
    from transformers import AutoTokenizer, LlamaForCausalLM

    from grasp.models import ModelConfig, prepare_model

    tokenizer = AutoTokenizer.from_pretrained(prepare_model(ModelConfig()))
    config = tiny_llama_config(
        len(tokenizer),
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    directory = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# --- the loopback judge ---------------------------------------------------------------------


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


@pytest.fixture(scope="session")
def loopback() -> Callable[[type[BaseHTTPRequestHandler]], AbstractContextManager[str]]:
    """``with loopback(Handler) as url``: Handler served on 127.0.0.1 (a free port) by a
    thread; ``url`` is its OpenAI-style base URL (``.../v1``). Shut down on leaving."""

    @contextlib.contextmanager
    def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        finally:
            httpd.shutdown()
            httpd.server_close()

    return serve


@pytest.fixture
def judge_server(loopback) -> Iterator[JudgeServer]:
    state = JudgeServer(url="")
    with loopback(_handler(state)) as url:
        state.url = url
        yield state


# --------------------------------------------------------------------------- shared by
# the evaluation, training and experiments tests


def make_trajectory(
    episode_id: str,
    answer: str | None,
    gold_answers: tuple[str, ...],
    gold: set[int],
    semantic: set[int] = frozenset(),
    keyword: set[int] = frozenset(),
    read: set[int] = frozenset(),
    turns: list[TurnRecord] | None = None,
    tool_calls: dict[str, int] | None = None,
    errors: dict[str, int] | None = None,
    stop_reason: str = "answered",
    dataset: str = "hotpotqa",
) -> Trajectory:
    """A finished episode with the given evidence; its reward is computed for real."""
    turns = turns or [TurnRecord(text="")]
    errors = errors or {}
    evidence = EpisodeEvidence(
        answer=answer,
        gold_answers=gold_answers,
        gold_paragraph_ids=frozenset(gold),
        evidence_ids={
            "semantic": frozenset(semantic),
            "keyword": frozenset(keyword),
            "read": frozenset(read),
        },
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
        stop_reason=StopReason(stop_reason),
        answer=answer,
        turns_used=len(turns),
        turn_budget=6,
        evidence_ids={
            "semantic": sorted(semantic),
            "keyword": sorted(keyword),
            "read": sorted(read),
        },
        tool_calls=tool_calls or {},
        errors=errors,
        reward=compute_reward(evidence),
    )


@pytest.fixture
def trajectory():
    """``make_trajectory``: build a finished episode by hand."""
    return make_trajectory


@pytest.fixture(scope="session")
def tiny_questions_file(tmp_path_factory, tiny_questions) -> Path:
    """The tiny corpus's questions, repeated under new ids so that both halves are non-empty."""
    import dataclasses

    questions = [
        dataclasses.replace(q, question_id=f"{q.question_id}-{copy}")
        for copy in range(4)
        for q in tiny_questions
    ]
    return write_normalized(questions, tmp_path_factory.mktemp("questions") / "dev.jsonl")
