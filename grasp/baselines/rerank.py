"""Cross-encoder reranking of retrieved passages (sentence-transformers ``CrossEncoder``).

    reranker = CrossEncoderReranker(RerankerConfig(path="cross-encoder/ms-marco-MiniLM-L6-v2"))
    best = reranker.rerank(question, candidates, k=5)

The model is loaded once, from a folder or a hub id (offline: a folder). Each candidate is
scored as the pair (query, "title: text"); the top ``k`` by score come back, ties in the
candidates' order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from grasp.baselines.config import RerankerConfig
from grasp.baselines.episode import Passage


class Reranker(Protocol):
    def rerank(self, query: str, passages: Sequence[Passage], k: int) -> list[Passage]:
        """The best ``k`` of ``passages`` for ``query``, best first."""
        ...


def pair_text(passage: Passage) -> str:
    """The passage side of a cross-encoder pair."""
    return f"{passage.title}: {passage.text}"


class CrossEncoderReranker:
    """Scores (query, passage) pairs with a cross-encoder and keeps the top k."""

    def __init__(self, config: RerankerConfig) -> None:
        from sentence_transformers import CrossEncoder

        if not config.path:
            raise ValueError("baseline.reranker.path is empty: no cross-encoder to load")
        try:
            self.model = CrossEncoder(
                config.path, device=config.device, max_length=config.max_length
            )
        except (OSError, ValueError) as error:  # a missing folder reads as a bad hub id
            raise FileNotFoundError(
                f"baseline.reranker.path={config.path!r}: cannot load a cross-encoder ({error})"
            ) from error
        self.batch_size = config.batch_size

    def scores(self, query: str, passages: Sequence[Passage]) -> np.ndarray:
        """[len(passages)] relevance score of each passage."""
        if not passages:
            return np.zeros(0, np.float32)
        pairs = [(query, pair_text(p)) for p in passages]
        scores = self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        return np.asarray(scores, dtype=np.float32).reshape(len(passages))

    def rerank(self, query: str, passages: Sequence[Passage], k: int) -> list[Passage]:
        order = np.argsort(-self.scores(query, passages), kind="stable")[:k]
        return [passages[i] for i in order.tolist()]
