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
    SELF_RAG = "self_rag"
    """Self-RAG's loop: grade, rewrite on the trigger, generate, check groundedness and the
    answer (Asai et al., 2024), with the checks prompted rather than trained."""
    ADAPTIVE_SELF_RAG = "adaptive_self_rag"
    """Adaptive-RAG as a router over the index's contents, then Self-RAG for the corpus route."""


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


class Trigger(StrEnum):
    """When a grading round makes Self-RAG rewrite the query and search again."""

    ANY = "any"
    """As soon as one hit is graded irrelevant (CRAG's semantics)."""
    ALL = "all"
    """Only when every hit was filtered out (Self-RAG's semantics)."""
    SHARE = "share"
    """When the share of hits graded irrelevant is above ``trigger_share``."""


class RewriteSearch(StrEnum):
    """Which retriever Self-RAG's rewritten queries search."""

    SAME = "same"
    """The first search's retriever: the query is rewritten for the index."""
    OTHER = "other"
    """The other retriever (semantic <-> keyword), as CRAG's corrective search."""


class SourceRoute(StrEnum):
    """The index router's two sources (adaptive_self_rag)."""

    CORPUS = "corpus"
    """Search the index, then Self-RAG's checks."""
    NONE = "none"
    """Answer from the question alone."""


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


DEFAULT_INDEX_ROUTE_PROMPT = (
    "A search index holds these documents:\n{index_summary}\n\n"
    "Should the question be answered by searching this index?\n"
    "A: yes, the index is likely to hold what the question needs.\n"
    "B: no, answer it without searching.\n"
    "Reply with one letter: A or B.\n\n"
    "Question: {question}\nLetter:"
)


@dataclass
class SelfRAGSettings:
    """Self-RAG's loop (self_rag, and adaptive_self_rag's corpus route)."""

    trigger: str = "all"
    """When a grading round rewrites and searches again: any (one irrelevant hit, CRAG),
    all (every hit filtered out, Self-RAG) or share (irrelevant share above trigger_share)."""
    trigger_share: float = 0.5
    """trigger=share: rewrite when the share of hits graded irrelevant is above this."""
    max_rewrites: int = 2
    """Most rewritten searches per episode (the trigger's and the answer check's together);
    each takes a turn, so env.turn_budget bounds them too."""
    max_regenerations: int = 1
    """Most extra generations per grading round when the groundedness check fails."""
    rewrite_search: str = "same"
    """same (the first search's retriever: the index, not the web) or other (the other
    retriever, as CRAG's corrective search)."""

    def __post_init__(self) -> None:
        self.trigger = parse_enum(Trigger, self.trigger, "baseline.self_rag.trigger")
        self.rewrite_search = parse_enum(
            RewriteSearch, self.rewrite_search, "baseline.self_rag.rewrite_search"
        )
        if not 0.0 <= self.trigger_share < 1.0:
            raise ValueError(
                f"baseline.self_rag.trigger_share must be in [0, 1), got {self.trigger_share}"
            )
        for name in ("max_rewrites", "max_regenerations"):
            if getattr(self, name) < 0:
                raise ValueError(
                    f"baseline.self_rag.{name} must be at least 0, got {getattr(self, name)}"
                )


@dataclass
class IndexRouterSettings:
    """adaptive_self_rag's router: corpus or no retrieval, from a summary of the index."""

    route_prompt: str = DEFAULT_INDEX_ROUTE_PROMPT
    """Routing prompt; {index_summary} and {question} are replaced; A: corpus, B: none."""
    summary_titles: int = 20
    """Titles of the index (evenly spaced over its paragraphs) named in the summary."""
    fallback_route: str = "corpus"
    """Route taken when the reply names neither letter: corpus or none."""

    def __post_init__(self) -> None:
        self.fallback_route = parse_enum(
            SourceRoute, self.fallback_route, "baseline.index_router.fallback_route"
        )
        if self.summary_titles < 1:
            raise ValueError(
                f"baseline.index_router.summary_titles must be at least 1, got "
                f"{self.summary_titles}"
            )


@dataclass
class BaselineConfig:
    """Which baseline wraps the policy, and its knobs."""

    kind: str = "none"
    """none, direct, single_step, ircot, crag, adaptive, self_rag or adaptive_self_rag."""
    search: str = "semantic"
    """semantic, lexical or hybrid (hybrid: single_step only). CRAG's corrective search uses
    the other retriever; Adaptive's single and multi routes use this one."""
    context_k: int = 5
    """single_step: passages given to the backend (after fusion or reranking)."""
    max_passages: int = 15
    """ircot, crag, self_rag: most passages shown to the backend (the first retrieved are
    kept); self_rag grades at most this many hits of each search."""
    max_passage_chars: int = 400
    """Each passage is cut to this many characters in the backend's prompts."""
    reranker: RerankerConfig = field(default_factory=RerankerConfig)
    """single_step: cross-encoder reranking of the env.top_k candidates down to context_k."""
    crag_threshold: float = 0.0
    """crag: search again when the share of hits graded irrelevant is above this (0: any
    irrelevant hit; 1: never)."""
    adaptive: AdaptiveSettings = field(default_factory=AdaptiveSettings)
    """adaptive: the router."""
    self_rag: SelfRAGSettings = field(default_factory=SelfRAGSettings)
    """self_rag, adaptive_self_rag: the trigger and the bounds of the loops."""
    index_router: IndexRouterSettings = field(default_factory=IndexRouterSettings)
    """adaptive_self_rag: the router over the index's contents."""
    answer_tokens: int = 32
    """Backend tokens for an answer."""
    reasoning_tokens: int = 64
    """ircot: backend tokens for one reasoning sentence."""
    grade_tokens: int = 4
    """crag, self_rag: backend tokens for one relevance grade or one yes/no check."""
    rewrite_tokens: int = 32
    """crag, self_rag: backend tokens for the rewritten query."""
    route_tokens: int = 4
    """adaptive, adaptive_self_rag: backend tokens for the route letter."""

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
