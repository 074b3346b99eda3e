"""grasp.corpus.encoder: every text reaches the model's tokenizer, whatever its code points."""

from __future__ import annotations

import numpy as np

from grasp.corpus.encoder import encodable
from grasp.types import Retriever


def test_lone_surrogates_become_replacement_characters_and_the_rest_is_kept():
    assert encodable("Marie Curie \ud83d") == "Marie Curie \ufffd"
    assert encodable("\ude00x\ud83d\ude00") == "\ufffdx\ufffd\ufffd"  # two halves, not a pair
    assert encodable("Curie \U0001f600 Ä \u202e") == "Curie \U0001f600 Ä \u202e"


def test_a_query_with_half_an_emoji_encodes_as_its_replacement_and_spares_the_batch(tiny_index):
    """Issue 48 item 4, for any caller of the encoder (the retrieval service, a benchmark):
    a lone surrogate raised TypeError in the tokenizer and lost every query of the batch."""
    queries = ["capital of Poland", "Marie Curie \ud83d", "who founded Google"]
    vectors = tiny_index.encoder.encode_queries(queries)
    assert vectors.shape == (3, tiny_index.encoder.dimension)
    clean = tiny_index.encoder.encode_queries(["Marie Curie \ufffd"])
    np.testing.assert_allclose(vectors[1], clean[0], atol=1e-6)
    alone = tiny_index.encoder.encode_queries(queries[:1])
    np.testing.assert_allclose(vectors[0], alone[0], atol=1e-6)
    hits = tiny_index.search(queries, Retriever.DENSE, k=2)
    assert [len(h) for h in hits] == [2, 2, 2]
