"""The environment over the service: the same episodes as in-process, switched by config alone."""

from __future__ import annotations

import pytest

from grasp.corpus import CorpusIndex, IndexConfig, IndexMismatchError
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.reward import DEFAULT_REWARD_CONFIG
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.scripted import HeuristicSearchPolicy
from grasp.serve.client import RemoteIndex, open_index

ENV_CONFIGS = {
    "grasp_tools": EnvConfig(turn_budget=5, top_k=3),
    "question_scope": EnvConfig(turn_budget=5, top_k=2, scope="question"),
    "paragraph_search": EnvConfig(
        tools=["semantic_search", "keyword_search", "answer"], turn_budget=4, top_k=2
    ),
}


def rollout(index, env_config: EnvConfig, questions) -> list[dict]:
    env = RetrievalEnvironment(index, env_config)
    engine = RolloutEngine(env, HeuristicSearchPolicy(reads=2), RolloutConfig(group_size=2))
    return [t.to_json() for t in engine.run(questions).scored(DEFAULT_REWARD_CONFIG)]


@pytest.mark.parametrize("name", list(ENV_CONFIGS))
def test_remote_episodes_equal_in_process_episodes(name, service_url, tiny_index, tiny_questions):
    config = IndexConfig(remote_url=service_url, remote_retries=1)
    remote = open_index(config, directory=None, questions=tiny_questions)  # type: ignore[arg-type]
    assert isinstance(remote, RemoteIndex)
    local = rollout(tiny_index, ENV_CONFIGS[name], tiny_questions)
    served = rollout(remote, ENV_CONFIGS[name], tiny_questions)
    assert served == local  # every turn's text, observation, hit ids and scores, rewards
    assert len(served) == 6
    searched = [t for t in served if t["semantic_paragraph_ids"] or t["keyword_paragraph_ids"]]
    assert len(searched) == 6
    remote.close()


def test_without_remote_url_open_index_loads_the_directory(tiny_index_dir, tiny_questions):
    index = open_index(IndexConfig(), tiny_index_dir, tiny_questions)
    assert isinstance(index, CorpusIndex)
    assert index.directory == tiny_index_dir


def test_a_service_over_another_corpus_is_refused(service_url, tiny_questions):
    config = IndexConfig(remote_url=service_url, remote_retries=0)
    with pytest.raises(IndexMismatchError, match="not the pooled corpus of these questions") as e:
        open_index(config, directory=None, questions=tiny_questions[:2])  # type: ignore[arg-type]
    assert service_url in str(e.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"prepend_title": False}, "prepend_title"),
        ({"granularities": ["sentence"]}, "granularities"),
    ],
)
def test_a_service_built_otherwise_is_refused(service_url, change, field):
    config = IndexConfig(remote_url=service_url, remote_retries=0, **change)
    with pytest.raises(IndexMismatchError, match=f"index was built with {field}=") as e:
        open_index(config, directory=None)  # type: ignore[arg-type]
    assert service_url in str(e.value)


def test_a_service_searching_otherwise_is_refused(service_url):
    config = IndexConfig(remote_url=service_url, remote_retries=0)
    config.encoder.query_prefix = "query: "
    with pytest.raises(IndexMismatchError, match="index.encoder.query_prefix=''"):
        open_index(config, directory=None)  # type: ignore[arg-type]
