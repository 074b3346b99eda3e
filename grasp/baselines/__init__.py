"""Baselines as policies over the same environment: direct answer, single-step retrieval
(optionally hybrid and reranked), IRCoT, CRAG, Adaptive-RAG, Self-RAG and Adaptive-RAG as an
index router + Self-RAG, each holding an LLM backend.

    built = build_baseline_policy(BaselineConfig(kind="ircot"), PolicyConfig(kind="hf"), env)
"""

from grasp.baselines.backend import Backend, Completion
from grasp.baselines.base import Action, BaselinePolicy
from grasp.baselines.config import BaselineConfig, BaselineKind, Route, SearchMode
from grasp.baselines.episode import EpisodeView, Passage
from grasp.baselines.factory import build_baseline_policy, make_baseline

__all__ = [
    "Action",
    "Backend",
    "BaselineConfig",
    "BaselineKind",
    "BaselinePolicy",
    "Completion",
    "EpisodeView",
    "Passage",
    "Route",
    "SearchMode",
    "build_baseline_policy",
    "make_baseline",
]
