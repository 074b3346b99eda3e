"""Hybrid fusion: exact fused scores and orders, the config's checks, and its use in search."""

from __future__ import annotations

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from grasp.config import EvalRetrievalConfig, register_configs, to_dataclass
from grasp.corpus import CorpusIndex, IndexConfig
from grasp.corpus.fusion import FusionConfig, FusionMethod, fuse
from grasp.paths import REPO_ROOT
from grasp.types import Granularity, Retriever

register_configs()

DENSE = (np.array([3, 1, 2]), np.array([0.9, 0.7, 0.5], np.float32))
KEYWORD = (np.array([1, 4]), np.array([10.0, 4.0], np.float32))


@pytest.mark.parametrize(
    ("config", "ids", "scores"),
    [
        (FusionConfig(method="rrf"), [1, 3, 4, 2], [1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63]),
        (
            FusionConfig(method="rrf", dense_weight=2.0),
            [1, 3, 2, 4],
            [2 / 62 + 1 / 61, 2 / 61, 2 / 63, 1 / 62],
        ),
        (FusionConfig(method="rrf", rrf_k=0), [1, 3, 4, 2], [1 / 2 + 1, 1, 1 / 2, 1 / 3]),
        (FusionConfig(method="rrf", bm25_weight=0.0), [3, 1, 2], [1 / 61, 1 / 62, 1 / 63]),
        # min-max: dense 0.9, 0.7, 0.5 -> 1, 0.5, 0; BM25 10, 4 -> 1, 0; equal scores by id
        (FusionConfig(), [1, 3, 2, 4], [1.5, 1.0, 0.0, 0.0]),  # the default: score
        (FusionConfig(method="score", bm25_weight=3.0), [1, 3, 2, 4], [3.5, 1.0, 0.0, 0.0]),
    ],
)
def test_fused_scores_and_order(config, ids, scores):
    units, fused = fuse(DENSE, KEYWORD, 10, config)
    assert units.tolist() == ids
    np.testing.assert_array_equal(fused, np.asarray(scores, dtype=np.float32))


def test_fusion_keeps_the_top_k_and_breaks_ties_by_unit_id():
    units, fused = fuse(
        (np.array([5]), np.array([0.3], np.float32)),
        (np.array([2]), np.array([1.0], np.float32)),
        1,
        FusionConfig(method="rrf"),
    )
    assert units.tolist() == [2] and fused.tolist() == [np.float32(1 / 61)]


def test_a_ranking_of_equal_scores_normalises_to_one():
    units, fused = fuse(
        (np.array([7, 8]), np.array([0.5, 0.5], np.float32)),
        (np.zeros(0, np.int64), np.zeros(0, np.float32)),
        5,
        FusionConfig(method="score"),
    )
    assert units.tolist() == [7, 8] and fused.tolist() == [1.0, 1.0]


def test_nothing_to_fuse_gives_an_empty_ranking():
    empty = (np.zeros(0, np.int64), np.zeros(0, np.float32))
    units, fused = fuse(empty, empty, 5, FusionConfig())
    assert units.shape == fused.shape == (0,)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"method": "max"}, r"index\.fusion\.method='max' is not one of: rrf, score"),
        ({"depth": 0}, r"index\.fusion\.depth must be at least 1, got 0"),
        ({"rrf_k": -1}, r"index\.fusion\.rrf_k must be at least 0"),
        ({"dense_weight": -0.5}, r"index\.fusion\.dense_weight must be >= 0, got -0\.5"),
        ({"bm25_weight": float("nan")}, r"index\.fusion\.bm25_weight must be >= 0, got nan"),
        ({"dense_weight": 0.0, "bm25_weight": 0.0}, r"cannot both be 0"),
    ],
)
def test_bad_fusion_settings_are_refused_naming_the_field(settings, message):
    with pytest.raises(ValueError, match=message):
        FusionConfig(**settings)


def test_fusion_is_configured_from_the_command_line():
    overrides = [
        "index.fusion.method=score",
        "index.fusion.depth=5",
        "index.fusion.bm25_weight=0.5",
    ]
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        config = to_dataclass(compose("eval_retrieval", overrides=overrides), EvalRetrievalConfig)
    fusion = config.index.fusion
    assert (fusion.method, fusion.depth, fusion.bm25_weight) == (FusionMethod.SCORE, 5, 0.5)
    assert fusion.describe() == "score depth 5, weights dense 1 / bm25 0.5"


def test_the_default_is_the_measured_choice():
    """results/fusion/: normalised scores, lists 20 deep, equal weights."""
    default = FusionConfig()
    assert (default.method, default.depth) == (FusionMethod.SCORE, 20)
    assert (default.dense_weight, default.bm25_weight) == (1.0, 1.0)


def test_fusion_settings_are_search_time_settings():
    assert "fusion" not in IndexConfig().build_fields()
    assert IndexConfig(fusion={"depth": 7}).fusion == FusionConfig(depth=7)  # as from JSON


@pytest.mark.parametrize("granularity", list(Granularity))
@pytest.mark.parametrize(
    ("weights", "alone"),
    [((1.0, 0.0), Retriever.DENSE), ((0.0, 1.0), Retriever.BM25)],
)
def test_hybrid_search_with_one_weight_zero_ranks_as_that_retriever(
    tiny_index_dir, granularity, weights, alone
):
    fusion = FusionConfig(dense_weight=weights[0], bm25_weight=weights[1])
    index = CorpusIndex.load(tiny_index_dir, IndexConfig(fusion=fusion))
    queries = ["largest city", "Who discovered polonium?", "Dutch programmer at Google"]
    hybrid = index.search(queries, Retriever.HYBRID, k=4, granularity=granularity)
    single = index.search(queries, alone, k=4, granularity=granularity)
    ids = [[(h.paragraph_id, h.sentence_id) for h in hits] for hits in hybrid]
    assert ids == [[(h.paragraph_id, h.sentence_id) for h in hits] for hits in single]
