"""Build the policy an evaluation runs: the configured policy alone, or wrapped by a baseline.

    built = build_baseline_policy(config.baseline, config.policy, env)
    engine = RolloutEngine(env, built.policy, config.rollout, chat=built.chat)

With ``baseline.kind=none`` this is ``build_policy`` with the environment's tool schemas. A
baseline builds the configured policy as its backend WITHOUT tool schemas (its prompts are
plain questions, the tools are the baseline's business) and returns no chat tokenizer: the
episode's turns are the baseline's text, not the backend's tokens, so there is nothing to train.
"""

from __future__ import annotations

from grasp.baselines.adaptive import AdaptivePolicy
from grasp.baselines.adaptive_self_rag import AdaptiveSelfRAGPolicy, index_summary
from grasp.baselines.backend import Backend
from grasp.baselines.base import BaselinePolicy
from grasp.baselines.config import BaselineConfig, BaselineKind
from grasp.baselines.crag import CRAGPolicy
from grasp.baselines.direct import DirectAnswerPolicy
from grasp.baselines.ircot import IRCoTPolicy
from grasp.baselines.rerank import CrossEncoderReranker
from grasp.baselines.self_rag import SelfRAGPolicy
from grasp.baselines.single_step import SingleStepPolicy
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.rollout.factory import BuiltPolicy, PolicyConfig, PolicyKind, build_policy

_POLICIES: dict[BaselineKind, type[BaselinePolicy]] = {
    BaselineKind.DIRECT: DirectAnswerPolicy,
    BaselineKind.IRCOT: IRCoTPolicy,
    BaselineKind.CRAG: CRAGPolicy,
    BaselineKind.ADAPTIVE: AdaptivePolicy,
    BaselineKind.SELF_RAG: SelfRAGPolicy,
}


def make_baseline(
    config: BaselineConfig, backend: Backend, env: EnvConfig, index_summary: str | None = None
) -> BaselinePolicy:
    """The baseline of ``config.kind`` over ``backend``; raises ValueError naming the field
    when the environment lacks a tool or turns it needs. ``index_summary`` (what the index
    holds, ``adaptive_self_rag.index_summary``) is adaptive_self_rag's, and required by it."""
    kind = BaselineKind(config.kind)
    if kind is BaselineKind.NONE:
        raise ValueError("baseline.kind=none wraps nothing: use the policy itself")
    if kind is BaselineKind.ADAPTIVE_SELF_RAG:
        if index_summary is None:
            raise ValueError(
                "baseline.kind=adaptive_self_rag routes by what the index holds: pass "
                "index_summary (build_baseline_policy derives it from the index)"
            )
        return AdaptiveSelfRAGPolicy(backend, config, env, index_summary=index_summary)
    if kind is BaselineKind.SINGLE_STEP:
        reranker = CrossEncoderReranker(config.reranker) if config.reranker.enabled else None
        return SingleStepPolicy(backend, config, env, reranker=reranker)
    if config.reranker.enabled:
        raise ValueError(f"baseline.reranker is for single_step, not baseline.kind={kind}")
    return _POLICIES[kind](backend, config, env)


def build_baseline_policy(
    baseline: BaselineConfig, policy: PolicyConfig, env: RetrievalEnvironment
) -> BuiltPolicy:
    """The configured policy, wrapped by ``baseline`` unless its kind is none."""
    if BaselineKind(baseline.kind) is BaselineKind.NONE:
        return build_policy(policy, env.prompt_tool_schemas)
    if PolicyKind(policy.kind) is PolicyKind.SCRIPTED:
        raise ValueError(
            f"baseline.kind={baseline.kind} needs a language model as its backend: "
            "policy=hf, a vllm policy or policy=openai, not policy=scripted"
        )
    backend = build_policy(policy, [])
    summary = None
    if BaselineKind(baseline.kind) is BaselineKind.ADAPTIVE_SELF_RAG:
        summary = index_summary(env.index.corpus, baseline.index_router.summary_titles)
    wrapped = make_baseline(baseline, Backend(backend.policy, backend.chat), env.config, summary)
    return BuiltPolicy(wrapped, chat=None, model=backend.model)
