"""The service's and its benchmark's Hydra configs compose, and typos fail naming the field."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from grasp.config import BenchServeConfig, ServeRetrievalConfig, register_configs, to_dataclass
from grasp.paths import REPO_ROOT
from grasp.serve.config import ServiceConfig
from grasp.types import Granularity, Retriever

register_configs()


def compose_as(name: str, schema, overrides: list[str]):
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        return to_dataclass(compose(name, overrides=overrides), schema)


def test_serve_retrieval_composes_with_the_gpu_index_config():
    config = compose_as(
        "serve_retrieval",
        ServeRetrievalConfig,
        ["index_dir=indexes/x", "index=e5_gpu", "host=0.0.0.0", "service.max_wait_ms=5"],
    )
    assert config.index_dir == "indexes/x" and config.host == "0.0.0.0" and config.port == 8000
    assert config.index.encoder.model == "intfloat/e5-base-v2"
    assert config.index.encoder.device == "cuda" and config.index.remote_url is None
    assert config.service.max_wait_ms == 5.0


def test_serve_retrieval_needs_an_index_dir():
    with pytest.raises(Exception, match="index_dir"):
        compose_as("serve_retrieval", ServeRetrievalConfig, [])


def test_bench_serve_defaults():
    config = compose_as("bench_serve", BenchServeConfig, [])
    assert config.retrievers == [Retriever.DENSE, Retriever.BM25]
    assert config.granularity is Granularity.SENTENCE
    assert config.concurrency == [1, 4, 16] and config.service == ServiceConfig()


@pytest.mark.parametrize(
    ("name", "schema", "override", "message"),
    [
        ("bench_serve", BenchServeConfig, "retrievers=[dense,tfidf]", "retrievers='tfidf'"),
        ("bench_serve", BenchServeConfig, "granularity=word", "granularity='word'"),
        ("serve_retrieval", ServeRetrievalConfig, "service.max_wiat_ms=1", "max_wiat_ms"),
    ],
)
def test_typos_fail_with_the_field_named(name, schema, override, message):
    with pytest.raises(Exception, match=message):
        compose_as(
            name, schema, ["index_dir=x", override] if name == "serve_retrieval" else [override]
        )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_k", 0, "service.max_k must be at least 1, got 0"),
        ("max_wait_ms", -1.0, "service.max_wait_ms must be >= 0, got -1.0"),
    ],
)
def test_service_bounds_are_validated(field, value, message):
    with pytest.raises(ValueError, match=message):
        ServiceConfig(**{field: value})


def test_remote_settings_are_not_build_fields():
    from grasp.corpus import IndexConfig

    local = IndexConfig()
    remote = IndexConfig(remote_url="http://x:8000", remote_timeout_s=5.0, remote_retries=0)
    assert local.build_fields() == remote.build_fields()
