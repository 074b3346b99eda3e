"""Context tokens: how much text the tools showed a policy in one episode; answer in evidence:
whether that text held the answer.

The paper's claim is recall at a smaller context: GRASP reads sentences, and a paragraph only
when it asks for one, where a single-step pipeline puts whole paragraphs in the prompt. The
count is the same for every row of the baseline table, agent or pipeline: the tokens of
every observation of an episode (search results, read paragraphs, and the refusals of
malformed calls, which the policy reads too), under one tokenizer::

    count = lambda text: len(tokenizer(text, add_special_tokens=False).input_ids)
    context_tokens(read_trajectories(Path("results/baselines/hf/ircot/hotpotqa")), count)

Recall counts the gold paragraphs among the hits; a read cannot raise it (it expands a hit
already counted), but it shows the paragraph's other sentences, which may hold the answer.
``answer_in_evidence`` asks whether some gold answer (or alias) appears, as whole normalized
tokens (``grasp.metrics.answer_contains``), in what the tools showed; undefined (NaN) for a
yes/no question, whose answer word appears in any text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from grasp.compressed import read_text, stored_path
from grasp.metrics import ConfidenceInterval, answer_contains, bootstrap_ci, normalize_answer
from grasp.models import ModelConfig, prepare_model
from grasp.rollout.trajectory import TRAJECTORIES_FILE, Trajectory

TokenCounter = Callable[[str], int]
"""Text -> its number of tokens."""


def token_counter(model: ModelConfig) -> TokenCounter:
    """Text -> tokens under ``model``'s tokenizer (the baseline table's unit: the policy
    model's)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(prepare_model(model)))
    return lambda text: len(tokenizer(text, add_special_tokens=False).input_ids)


def observation_tokens(trajectory: Trajectory, count: TokenCounter) -> int:
    """Tokens of every observation the episode's policy was shown."""
    return sum(count(turn.observation) for turn in trajectory.turns if turn.observation)


YES_NO = frozenset({"yes", "no"})


def answer_in_evidence(trajectory: Trajectory) -> float:
    """1.0 if a gold answer (or alias) appears in the episode's observations, else 0.0; NaN for
    a yes/no question (module docstring)."""
    if any(normalize_answer(gold) in YES_NO for gold in trajectory.gold_answers):
        return math.nan
    shown = "\n".join(turn.observation for turn in trajectory.turns if turn.observation)
    return answer_contains(shown, trajectory.gold_answers)


def context_tokens(trajectories: Sequence[Trajectory], count: TokenCounter) -> ConfidenceInterval:
    """Mean observation tokens per episode, with its 95% bootstrap interval."""
    return bootstrap_ci([observation_tokens(t, count) for t in trajectories])


def has_trajectories(folder: Path) -> bool:
    """Whether ``folder`` holds a trajectories.jsonl, plain or stored as .xz."""
    return stored_path(folder / TRAJECTORIES_FILE) is not None


def read_trajectories(folder: Path) -> list[Trajectory]:
    """The trajectories of one finished evaluation folder, its trajectories.jsonl plain or
    stored as .xz (read only: a finished evaluation has no torn line; a line that is not a
    trajectory is named)."""
    path = folder / TRAJECTORIES_FILE
    trajectories = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            trajectories.append(Trajectory.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: line {number} is not a trajectory ({error})") from None
    return trajectories
