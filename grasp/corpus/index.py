"""The search API: batched dense, BM25 and hybrid search over a built index directory.

Batching is the main API. The rollout engine sends one call per tool per turn for all
active episodes, so ``search`` takes many queries and encodes them in one forward pass.
Each query may carry its own scope (the paragraph ids it may see), for the per-question
distractor setting; unscoped queries search the whole pooled corpus.

Run ``python scripts/build_index.py`` to build a directory, then::

    index = CorpusIndex.load(Path("indexes/hotpotqa-dev"))
    hits = index.search(["Who directed Ed Wood?"], Retriever.BM25, k=5)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from grasp.corpus.bm25 import KeywordIndex, top_positive
from grasp.corpus.build import (
    BM25_DIR,
    DENSE_FILE,
    EMBEDDINGS_FILE,
    IndexConfig,
    config_from_manifest,
    needed_files,
)
from grasp.corpus.corpus import SentenceCorpus
from grasp.corpus.dense import configure_search, flat_vectors, load_dense_index
from grasp.corpus.encoder import DenseEncoder
from grasp.corpus.fusion import RRF_K as RRF_K  # re-exported: baselines fuse with it too
from grasp.corpus.fusion import fuse
from grasp.corpus.index_path import check_index_path
from grasp.corpus.manifest import (
    MANIFEST_FILE,
    IndexCorruptError,
    IndexMismatchError,
    Manifest,
    ManifestError,
)
from grasp.types import Granularity, Hit, Retriever

Scope = np.ndarray | None


class SearchIndex(Protocol):
    """What the environment and evaluation use of an index.

    ``CorpusIndex`` (in this process) and ``grasp.serve.client.RemoteIndex`` (a retrieval
    service over HTTP) both provide it; ``grasp.serve.client.open_index`` picks one from the
    configuration.
    """

    corpus: SentenceCorpus
    granularities: list[Granularity]

    def search(
        self,
        queries: Sequence[str],
        retriever: Retriever,
        k: int = 5,
        granularity: Granularity = Granularity.SENTENCE,
        scopes: Sequence[Scope] | None = None,
    ) -> list[list[Hit]]:
        """Top-``k`` hits for each query, best first (see ``CorpusIndex.search``)."""
        ...

    def warm_up(self) -> SearchIndex:
        """Make the first search as fast as the next ones; returns the index."""
        ...


def check_search(
    where: object,
    granularities: Sequence[Granularity],
    queries: Sequence[str],
    k: int,
    granularity: Granularity,
    scopes: Sequence[Scope] | None,
) -> None:
    """The argument checks of every ``SearchIndex.search``; ``where`` names the index."""
    if granularity not in granularities:
        raise IndexMismatchError(
            f"{where} has no {granularity} index (built: {list(granularities)})"
        )
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if scopes is not None and len(scopes) != len(queries):
        raise ValueError(f"{len(scopes)} scopes for {len(queries)} queries")


class CorpusIndex:
    """A loaded index directory: the corpus plus dense and BM25 indexes per granularity."""

    def __init__(
        self, directory: Path, manifest: Manifest, corpus: SentenceCorpus, config: IndexConfig
    ) -> None:
        self.directory = directory
        self.manifest = manifest
        self.corpus = corpus
        self.config = config
        self.granularities = [Granularity(g) for g in manifest.config["granularities"]]
        self._dense: dict[Granularity, object] = {}
        self._vectors: dict[Granularity, np.ndarray] = {}
        self._keyword: dict[Granularity, KeywordIndex] = {}
        self._encoder: DenseEncoder | None = None

    @classmethod
    def load(cls, directory: Path, config: IndexConfig | None = None) -> CorpusIndex:
        """Open an index directory, checking its files and that it matches ``config``.

        Without ``config``, the index is searched as it was built (default search settings).
        Raises IndexPathError (the directory is a symlink loop, a broken symlink or a file),
        IndexMissingError, IndexCorruptError (ManifestError for the manifest's own fields) or
        IndexMismatchError, each naming the path, file or field at fault.
        """
        directory = Path(directory)
        check_index_path(directory)
        manifest = Manifest.read(directory)
        granularities = [Granularity(g) for g in manifest.config["granularities"]]
        manifest.require_files(directory, needed_files(directory, granularities))
        if config is None:
            config = config_from_manifest(manifest.config, directory / MANIFEST_FILE)
        manifest.check_config(config.build_fields())
        manifest.verify_files(directory, checksums=config.checksums())
        corpus = SentenceCorpus.load(directory / "corpus")
        expected = manifest.corpus
        if (corpus.num_sentences, corpus.num_paragraphs) != (
            expected["num_sentences"],
            expected["num_paragraphs"],
        ):
            raise IndexCorruptError(f"{directory / 'corpus'}: counts differ from the manifest")
        index = cls(directory, manifest, corpus, config)
        for granularity in index.granularities:
            index._load_granularity(granularity)
        return index

    def _load_granularity(self, granularity: Granularity) -> None:
        unit_dir = self.directory / granularity.value
        num_units = self.corpus.num_units(granularity)
        dense = load_dense_index(unit_dir / DENSE_FILE)
        if dense.ntotal != num_units:
            raise IndexCorruptError(
                f"{unit_dir / DENSE_FILE} holds {dense.ntotal} vectors for {num_units} units"
            )
        self._check_dimension(unit_dir / DENSE_FILE, dense.d)
        vectors = flat_vectors(dense)
        if vectors is None:
            vectors = np.load(unit_dir / EMBEDDINGS_FILE, mmap_mode="r")
            self._check_dimension(unit_dir / EMBEDDINGS_FILE, vectors.shape[1])
        keyword = KeywordIndex.load(unit_dir / BM25_DIR, self.config.bm25)
        if keyword.num_units != num_units:
            raise IndexCorruptError(
                f"{unit_dir / BM25_DIR} indexes {keyword.num_units} texts for {num_units} units"
            )
        self._vectors[granularity] = vectors
        self._dense[granularity] = configure_search(dense, self.config.dense)
        self._keyword[granularity] = keyword

    def _check_dimension(self, path: Path, dimension: int) -> None:
        if dimension != self.manifest.dimension:
            raise ManifestError(
                f"{self.directory / MANIFEST_FILE}: field dimension is {self.manifest.dimension}"
                f" but {path} holds {dimension}-d vectors: rebuild the index"
            )

    @property
    def encoder(self) -> DenseEncoder:
        """The query encoder, loaded on first dense search."""
        if self._encoder is None:
            self._encoder = DenseEncoder(self.config.encoder)
        return self._encoder

    def warm_up(self) -> CorpusIndex:
        """Load the query encoder now, so the first dense search does not pay for it."""
        self.encoder.encode_queries(["warm up"])
        return self

    # ------------------------------------------------------------------ search

    def search(
        self,
        queries: Sequence[str],
        retriever: Retriever,
        k: int = 5,
        granularity: Granularity = Granularity.SENTENCE,
        scopes: Sequence[Scope] | None = None,
    ) -> list[list[Hit]]:
        """Top-``k`` hits for each query, best first.

        ``scopes[i]``, when given and not None, restricts query ``i`` to the units inside
        those paragraph ids. Fewer than ``k`` hits come back when fewer units match.
        """
        check_search(self.directory, self.granularities, queries, k, granularity, scopes)
        if not queries:
            return []
        ranked = self._rank(list(queries), retriever, k, granularity, scopes)
        return [self._hits(ids, scores, retriever, granularity) for ids, scores in ranked]

    def _rank(
        self,
        queries: list[str],
        retriever: Retriever,
        k: int,
        granularity: Granularity,
        scopes: Sequence[Scope] | None,
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        if retriever is Retriever.HYBRID:
            fusion = self.config.fusion
            depth = max(k, fusion.depth)
            dense = self._rank(queries, Retriever.DENSE, depth, granularity, scopes)
            keyword = self._rank(queries, Retriever.BM25, depth, granularity, scopes)
            return [fuse(d, w, k, fusion) for d, w in zip(dense, keyword, strict=True)]
        scopes = scopes if scopes is not None else [None] * len(queries)
        scoped = [i for i, s in enumerate(scopes) if s is not None]
        free = [i for i, s in enumerate(scopes) if s is None]
        results: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(queries)
        if retriever is Retriever.DENSE:
            vectors = self.encoder.encode_queries(queries)
            if free:
                scores, ids = self._dense[granularity].search(vectors[free], k)
                for row, i in enumerate(free):
                    results[i] = _valid(ids[row], scores[row])
            for i in scoped:
                units = self.corpus.scope_units(scopes[i], granularity)
                unit_scores = np.asarray(self._vectors[granularity][units], np.float32) @ vectors[i]
                results[i] = _top(units, unit_scores, k)
        else:
            keyword = self._keyword[granularity]
            if free:
                ids, scores = keyword.search([queries[i] for i in free], k)
                for row, i in enumerate(free):
                    results[i] = _valid(ids[row], scores[row])
            for i in scoped:
                units = self.corpus.scope_units(scopes[i], granularity)
                positions, unit_scores = top_positive(keyword.score_units(queries[i], units), k)
                results[i] = (units[positions], unit_scores)
        return results  # type: ignore[return-value]

    def _hits(
        self, ids: np.ndarray, scores: np.ndarray, retriever: Retriever, granularity: Granularity
    ) -> list[Hit]:
        corpus = self.corpus
        hits = []
        for rank, (unit, score) in enumerate(zip(ids.tolist(), scores.tolist(), strict=True)):
            if granularity is Granularity.SENTENCE:
                paragraph_id = corpus.paragraph_of(unit)
                sentence_id, text = unit, corpus.sentence(unit)
            else:
                paragraph_id, sentence_id, text = unit, None, corpus.paragraph_text(unit)
            hits.append(
                Hit(
                    paragraph_id=paragraph_id,
                    sentence_id=sentence_id,
                    title=corpus.title(paragraph_id),
                    text=text,
                    score=float(score),
                    retriever=retriever,
                    rank=rank,
                )
            )
        return hits


def _valid(ids: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = ids >= 0
    return ids[keep].astype(np.int64), scores[keep].astype(np.float32)


def _top(units: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    # Stable sort on -score keeps ties in unit-id order, so results are deterministic.
    order = np.argsort(-scores, kind="stable")[:k]
    return units[order].astype(np.int64), scores[order].astype(np.float32)
