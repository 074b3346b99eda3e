"""Cross-encoder reranking with a tiny randomly initialised BERT cross-encoder (test-only
weights saved to a temporary folder; no trained cross-encoder is available offline)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from grasp.baselines import BaselineConfig
from grasp.baselines.config import RerankerConfig
from grasp.baselines.episode import Passage
from grasp.baselines.rerank import CrossEncoderReranker, pair_text
from grasp.baselines.single_step import SingleStepPolicy
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.reward import DEFAULT_REWARD_CONFIG
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.types import ToolName


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory, tiny_questions) -> str:
    """A 1-layer, 16-wide BERT sequence classifier with random weights and a corpus vocabulary."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder = tmp_path_factory.mktemp("tiny-random-cross-encoder")
    words = sorted(
        {
            w
            for q in tiny_questions
            for text in [q.question]
            + [s for p in q.paragraphs for s in p.sentences]
            + [p.title for p in q.paragraphs]
            for w in re.findall(r"\w+|[^\w\s]", text.lower())
        }
    )
    (folder / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])
    )
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(words) + 5,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=1,
        initializer_range=0.5,  # spread scores: the default 0.02 gives near-ties
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    return str(folder)


def passages(texts):
    return [
        Passage(i, i, f"T{i}", text, ToolName.SEMANTIC_SEARCH, i) for i, text in enumerate(texts)
    ]


def test_rerank_orders_candidates_by_the_cross_encoder_scores(tiny_cross_encoder, tiny_questions):
    reranker = CrossEncoderReranker(RerankerConfig(path=tiny_cross_encoder, max_length=128))
    candidates = passages([s for p in tiny_questions[0].paragraphs for s in p.sentences if s])
    query = tiny_questions[0].question
    scores = reranker.scores(query, candidates)
    assert scores.shape == (len(candidates),) and len(set(scores.tolist())) == len(candidates)
    direct = reranker.model.predict([(query, pair_text(p)) for p in candidates])
    np.testing.assert_allclose(scores, np.asarray(direct, np.float32).reshape(-1), rtol=1e-5)
    top = reranker.rerank(query, candidates, k=3)
    assert top == [candidates[i] for i in np.argsort(-scores, kind="stable")[:3]]
    assert [p.key for p in reranker.rerank(query, candidates, k=len(candidates))] != [
        p.key for p in candidates
    ], "the random cross-encoder reorders the candidates"
    assert reranker.rerank(query, [], k=3) == []


def test_single_step_answers_from_the_reranked_top_k(
    tiny_index, tiny_questions, tiny_cross_encoder, canned
):
    llm, backend = canned(answer="Auckland")
    reranker = CrossEncoderReranker(RerankerConfig(path=tiny_cross_encoder, max_length=128))
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=6, turn_budget=3))
    config = BaselineConfig(kind="single_step", context_k=2)
    policy = SingleStepPolicy(backend, config, env.config, reranker=reranker)
    [t] = (
        RolloutEngine(env, policy, RolloutConfig())
        .run(tiny_questions[1:2])
        .scored(DEFAULT_REWARD_CONFIG)
    )
    hits = t.turns[0].hits
    assert len(hits) == 6
    corpus = tiny_index.corpus
    candidates = [
        Passage(h["paragraph_id"], h["sentence_id"], corpus.title(h["paragraph_id"]),
                corpus.sentence(h["sentence_id"]), ToolName.SEMANTIC_SEARCH, rank)
        for rank, h in enumerate(hits)
    ]  # fmt: skip
    scores = reranker.scores(tiny_questions[1].question, candidates)
    best = [candidates[i] for i in np.argsort(-scores, kind="stable")[:2]]
    [prompt] = llm.prompts("answer")
    assert [line for line in prompt.splitlines() if line.startswith("[")] == [
        f"[{n}] {p.title}: {p.text}" for n, p in enumerate(best, start=1)
    ]
    assert t.extra["context_paragraph_ids"] == sorted({p.paragraph_id for p in best})


def test_a_missing_cross_encoder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="baseline.reranker.path=.*nothing-here"):
        CrossEncoderReranker(RerankerConfig(path=str(tmp_path / "nothing-here")))
    with pytest.raises(ValueError, match="baseline.reranker.path is empty"):
        CrossEncoderReranker(RerankerConfig())
    with pytest.raises(ValueError, match="baseline.reranker.enabled needs"):
        RerankerConfig(enabled=True)
