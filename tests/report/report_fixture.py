"""A small training run directory for the report tests, written by the real code paths.

Scripted policies act in the real environment over the tiny index (tests/conftest.py) and
the rollout engine scores them; ``evaluate_policy`` writes eval_before/ and eval_after/,
``MetricsFileCallback`` writes metrics.jsonl from ``rollout_metrics``, ``write_trajectories``
writes the step samples and the trainer's ``run_results`` the top-level results.json.

Episodes of eval_after, by question (turn budget 4):

    q-curie    search, read, answer "polonium and radium"            correct; model text
               carries an injected <script>
    q-hillary  malformed call, keyword search, answer "Auckland city"  partial (F1 2/3),
               one parse error
    q-python   four unclosed tool calls                                no answer, 4 parse errors

eval_before answers "Paris" at once for every question (wrong). Training steps 1 and 2 use
the eval_before script, steps 3 and 4 the eval_after one; samples are saved at steps 2 and 4.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.eval.policy_eval import evaluate_policy
from grasp.reward import DEFAULT_REWARD_CONFIG
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.policy import GenerationRequest
from grasp.rollout.scripted import ScriptedPolicy, tool_call_text
from grasp.rollout.trajectory import write_trajectories
from grasp.train.callbacks import MetricsFileCallback
from grasp.train.config import TrainConfig
from grasp.train.rollout_stats import ROLLOUT_SECONDS_KEY, rollout_metrics
from grasp.train.run_folder import RunFolder
from grasp.train.trainer import TrainingData, run_results

INJECTION = "<script>window.__injected = 1; console.error('injected')</script>"
"""Model text that must reach the report as text, never as a script."""
STEPS = 4
GROUP = 2
TRAJECTORIES_EVERY = 2
ENV = EnvConfig(turn_budget=4, top_k=3, final_message="error")
EXPECTED_OUTCOMES = {
    "eval_after": {"q-curie": "correct", "q-hillary": "partial", "q-python": "no_answer"},
    "eval_before": {"q-curie": "wrong", "q-hillary": "wrong", "q-python": "wrong"},
}
EXPECTED_PARSE_ERRORS = {
    "eval_after": {"q-curie": 0, "q-hillary": 1, "q-python": 4},
    "eval_before": {"q-curie": 0, "q-hillary": 0, "q-python": 0},
}


def _turn(request: GenerationRequest) -> int:
    return sum(1 for m in request.messages if m["role"] == "assistant")


def _last_tool_text(request: GenerationRequest) -> str:
    return next(m["content"] for m in reversed(request.messages) if m["role"] == "tool")


def after_script(request: GenerationRequest) -> str:
    """The eval_after episodes of the module docstring, by question."""
    question_id = request.request_id.split("#")[0]
    turn = _turn(request)
    if question_id == "q-curie":
        if turn == 0:
            reasoning = f"Find the physicist first. {INJECTION}"
            return tool_call_text("semantic_search", reasoning, query="physicist born in Warsaw")
        if turn == 1:
            sentence_id = int(re.search(r"\[s(\d+) p\d+", _last_tool_text(request)).group(1))
            return tool_call_text("read_paragraph", sentence_id=sentence_id)
        return tool_call_text("answer", "Curie found them.", answer="polonium and radium")
    if question_id == "q-hillary":
        if turn == 0:
            return '<tool_call>\n{"name": "keyword_search", "arguments": {"query": "Hillary"\n</tool_call>'
        if turn == 1:
            return tool_call_text("keyword_search", query="Edmund Hillary born")
        return tool_call_text("answer", answer="Auckland city")
    return '<tool_call>\n{"name": "semantic_search", "arguments": {"query": "Python"}}'


def before_script(request: GenerationRequest) -> str:
    return tool_call_text("answer", answer="Paris")


def _engine(index, script: Callable[[GenerationRequest], str]) -> RolloutEngine:
    env = RetrievalEnvironment(index, ENV)
    return RolloutEngine(env, ScriptedPolicy(script), RolloutConfig(group_size=1))


def build_run_dir(run_dir: Path, index, questions) -> Path:
    """Write the training run directory of the module docstring into ``run_dir``."""
    questions = list(questions)
    config = TrainConfig(experiment="report_fixture", run_dir=str(run_dir), env=ENV)
    resolved = json.loads(json.dumps(dataclasses.asdict(config), default=str))
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(resolved, indent=2))
    before = evaluate_policy(
        _engine(index, before_script), questions, run_dir / "eval_before", resolved
    )
    callback = MetricsFileCallback(run_dir)
    for step in range(1, STEPS + 1):
        script = before_script if step <= STEPS // 2 else after_script
        state = SimpleNamespace(global_step=step, is_world_process_zero=True)
        callback.on_step_begin(None, state, None)
        batch = _engine(index, script).run(questions, group_size=GROUP)
        callback.on_step_end(None, state, None)
        logs = {
            "loss": 0.1 / step,
            "kl": 0.01 * step,
            **rollout_metrics(batch.scored(DEFAULT_REWARD_CONFIG), GROUP),
        }
        logs[ROLLOUT_SECONDS_KEY] = batch.timings.total
        callback.on_log(None, state, None, logs=logs)
        if step % TRAJECTORIES_EVERY == 0:
            sample = _engine(index, script).run(questions[:2]).scored(DEFAULT_REWARD_CONFIG)
            write_trajectories(sample, run_dir / "trajectories" / f"step_{step:06d}.jsonl")
    # TRL's closing record: no reward, a train_runtime; the report leaves it out of the curves.
    final = SimpleNamespace(global_step=STEPS, is_world_process_zero=True)
    callback.on_log(None, final, None, logs={"train_runtime": 1.5, "train_loss": 0.05})
    after = evaluate_policy(
        _engine(index, after_script), questions, run_dir / "eval_after", resolved
    )
    data = TrainingData(train=questions, eval=questions, pooled=questions, label="tiny corpus")
    RunFolder(run_dir).write_results(
        run_results(config, data, before.results, after.results, STEPS)
    )
    return run_dir
