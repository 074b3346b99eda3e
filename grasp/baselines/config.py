"""Configuration of the baseline policies (Hydra group ``baseline``, ``configs/baseline/``).

``kind: none`` leaves the configured policy acting on its own (the prompted GRASP agent, or a
Search-R1-style agent when ``env.tools`` is ``[search, answer]``). Any other kind wraps the
configured policy as the *backend* of a baseline whose control flow is fixed in code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grasp.types import StrEnum, parse_enum


class BaselineKind(StrEnum):
    NONE = "none"
    """No wrapper: the policy chooses its own tool calls (the prompted GRASP agent)."""
    DIRECT = "direct"
    """The backend answers from the question alone: no retrieval."""
    SINGLE_STEP = "single_step"
    """One search with the question (optionally reranked), then the backend answers."""
    IRCOT = "ircot"
    """Interleaved retrieval and chain-of-thought (Trivedi et al., 2023)."""
    CRAG = "crag"
    """Corrective RAG: grade the hits, rewrite and search again when too many are irrelevant
    (Yan et al., 2024)."""
    ADAPTIVE = "adaptive"
    """Adaptive-RAG: route each question to direct, single-step or IRCoT (Jeong et al., 2024)."""


class SearchMode(StrEnum):
    """Which environment search a baseline issues."""

    SEMANTIC = "semantic"
    """semantic_search (dense)."""
    LEXICAL = "lexical"
    """keyword_search (BM25)."""
    HYBRID = "hybrid"
    """Both searches with the same query, fused by reciprocal rank in the baseline."""


class Route(StrEnum):
    """Adaptive-RAG's three strategies."""

    NONE = "none"
    SINGLE = "single"
    MULTI = "multi"


class RouteBy(StrEnum):
    BACKEND = "backend"
    """The backend classifies the question with ``route_prompt`` (A, B or C)."""
    LENGTH = "length"
    """A rule classifier on the question's word count, with two thresholds."""


DEFAULT_ROUTE_PROMPT = (
    "How much searching does this question need?\n"
    "A: none, it is common knowledge.\n"
    "B: one search finds the answer.\n"
    "C: several searches, each one building on the last (a multi-hop question).\n"
    "Reply with one letter: A, B or C.\n\n"
    "Question: {question}\nLetter:"
)


@dataclass
class RerankerConfig:
    """An optional cross-encoder that reorders the retrieved candidates of single_step."""

    enabled: bool = False
    """Rerank the candidates (single_step only)."""
    path: str = ""
    """sentence-transformers CrossEncoder folder or hub id; required when enabled."""
    device: str = "cpu"
    """Torch device of the cross-encoder."""
    batch_size: int = 32
    """Query-passage pairs scored per forward pass."""
    max_length: int = 512
    """Tokens of one query-passage pair (longer pairs are truncated)."""

    def __post_init__(self) -> None:
        if self.enabled and not self.path:
            raise ValueError(
                "baseline.reranker.enabled needs baseline.reranker.path (a CrossEncoder folder "
                "or hub id)"
            )


@dataclass
class AdaptiveSettings:
    """How Adaptive-RAG routes a question before retrieving."""

    route_by: str = "backend"
    """backend (the backend answers route_prompt) or length (word-count thresholds)."""
    route_prompt: str = DEFAULT_ROUTE_PROMPT
    """Routing prompt for the backend; {question} is replaced; A/B/C mean none/single/multi."""
    fallback_route: str = "single"
    """Route taken when the backend's reply names no letter: none, single or multi."""
    none_max_words: int = 6
    """length router: questions of at most this many words get no retrieval."""
    multi_min_words: int = 14
    """length router: questions of at least this many words get multi-step retrieval."""

    def __post_init__(self) -> None:
        self.route_by = parse_enum(RouteBy, self.route_by, "baseline.adaptive.route_by")
        self.fallback_route = parse_enum(
            Route, self.fallback_route, "baseline.adaptive.fallback_route"
        )


@dataclass
class BaselineConfig:
    """Which baseline wraps the policy, and its knobs."""

    kind: str = "none"
    """none, direct, single_step, ircot, crag or adaptive."""
    search: str = "semantic"
    """semantic, lexical or hybrid (hybrid: single_step only). CRAG's corrective search uses
    the other retriever; Adaptive's single and multi routes use this one."""
    context_k: int = 5
    """single_step: passages given to the backend (after fusion or reranking)."""
    max_passages: int = 15
    """ircot, crag: most passages shown to the backend (the first retrieved are kept)."""
    max_passage_chars: int = 400
    """Each passage is cut to this many characters in the backend's prompts."""
    reranker: RerankerConfig = field(default_factory=RerankerConfig)
    """single_step: cross-encoder reranking of the env.top_k candidates down to context_k."""
    crag_threshold: float = 0.0
    """crag: search again when the share of hits graded irrelevant is above this (0: any
    irrelevant hit; 1: never)."""
    adaptive: AdaptiveSettings = field(default_factory=AdaptiveSettings)
    """adaptive: the router."""
    answer_tokens: int = 32
    """Backend tokens for an answer."""
    reasoning_tokens: int = 64
    """ircot: backend tokens for one reasoning sentence."""
    grade_tokens: int = 4
    """crag: backend tokens for one relevance grade."""
    rewrite_tokens: int = 32
    """crag: backend tokens for the rewritten query."""
    route_tokens: int = 4
    """adaptive: backend tokens for the route letter."""

    def __post_init__(self) -> None:
        self.kind = parse_enum(BaselineKind, self.kind, "baseline.kind")
        self.search = parse_enum(SearchMode, self.search, "baseline.search")
        for name in ("context_k", "max_passages", "max_passage_chars", "answer_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"baseline.{name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 <= self.crag_threshold <= 1.0:
            raise ValueError(
                f"baseline.crag_threshold must be in [0, 1], got {self.crag_threshold}"
            )
