"""A trajectory as text, turn by turn: what a reader checks first in an episode.

The question and its gold, then every turn: the tool called with its arguments (or why the
turn was refused, with what the model wrote), the observation the policy read, then the
answer, the stop reason and the reward's terms::

    print(transcript(trajectory))        # scripts/evaluate.py show=1 prints one per dataset
"""

from __future__ import annotations

import json
import textwrap

from grasp.reward import TERM_NAMES
from grasp.rollout.trajectory import Trajectory

SHOWN_TERMS = (*TERM_NAMES, "total")
"""Each reward term (``grasp.reward.REWARD_TERMS``), then the total."""


def transcript(trajectory: Trajectory, observation_lines: int = 8) -> str:
    """The episode turn by turn; each observation shows at most ``observation_lines`` lines."""
    t = trajectory
    lines = [
        f"question ({t.dataset} {t.question_id}): {t.question}",
        f"gold answer: {' | '.join(t.gold_answers)}; gold paragraphs: {t.gold_paragraph_ids}",
    ]
    for number, turn in enumerate(t.turns, start=1):
        call = turn.call
        if call:
            arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False)
            lines.append(f"turn {number}: {call['name']} {arguments}")
        else:
            written = " ".join(turn.text.split())
            lines.append(f"turn {number}: refused ({turn.error}): {written[:200]}")
        observation = turn.observation
        if observation:
            shown = observation.splitlines()
            kept = shown[:observation_lines]
            if len(shown) > observation_lines:
                kept.append(f"... ({len(shown) - observation_lines} more lines)")
            lines += [textwrap.indent(line, "    | ") for line in kept]
    lines.append(f"answer: {t.answer!r} (stop: {t.stop_reason}, {t.turns_used} turns)")
    terms = t.reward.as_dict()
    reward = "  ".join(f"{term} {terms[f'reward/{term}']:.3f}" for term in SHOWN_TERMS)
    lines.append(f"reward: {reward}")
    lines.append(
        f"EM {t.reward.em:.0f}  F1 {t.reward.f1:.3f}  read paragraphs: {t.read_paragraph_ids}"
    )
    return "\n".join(lines)
