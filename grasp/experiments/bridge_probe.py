"""The next hop's query, probed without a model: how often a query written after the first
searches finds a gold paragraph they missed.

A warm start can teach a second hop only if its scripted query for that hop finds new gold;
GRPO then has a choice worth ranking. ``probe`` plays the first part of the warm start's plans
with no model (a semantic and a keyword search on the question, top-k each; read the first
hit's paragraph, as ``grasp/rollout/scripted.py`` reads the first unread hit) and, on the
questions that still lack a gold paragraph, runs one more search, keyword and semantic, with
each candidate query (``QUERIES``):

- ``bridge``: the warm start's own (``grasp.rollout.scripted.bridge_query``: the read
  paragraph's title and the question's content words the title does not name);
- ``entity``: the first name the read paragraph mentions that neither the question nor the
  paragraph's title contains (``grasp.rollout.scripted.bridge_entity``), the bridge entity of
  a two-hop question;
- ``entity_words``: that name and the question's content words neither it nor the title names
  (``grasp.rollout.scripted.entity_query``, the warm start's ``<search>:entity``);
- ``question_words``: the question's content words alone (a control: the question reworded).

``deeper`` is the other control: the question's own hits k+1..2k, which cost the same number
of hits as one more search. A new gold paragraph is one of the missing gold paragraphs among
the new search's hits. ``run_probe`` probes a configured split (``scripts/bridge_probe.py``
writes its report as JSON).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from grasp.corpus.index import CorpusIndex, SearchIndex
from grasp.data import sample_questions
from grasp.data.config import read_questions
from grasp.experiments.config import BridgeProbeConfig
from grasp.paths import default_index_dir
from grasp.rollout.scripted import (
    bridge_entity,
    bridge_query,
    content_words,
    entity_query,
    named_entities,
)
from grasp.types import Hit, Question, Retriever

QUERIES = ("bridge", "entity", "entity_words", "question_words")
"""The candidate queries of the next hop, in the report's order."""
RETRIEVERS = (Retriever.BM25, Retriever.DENSE)
"""keyword_search and semantic_search."""


def next_hop_queries(question: str, hits: Sequence[Hit], read: Hit, read_text: str) -> dict:
    """Each candidate query of ``QUERIES`` after the first searches' ``hits``, having read the
    paragraph of hit ``read`` (its text ``read_text``)."""
    labelled = [(str(h.sentence_id), str(h.paragraph_id), h.title) for h in hits]
    return {
        "bridge": bridge_query(question, labelled, {read.title}),
        "entity": bridge_entity(question, read.title, read_text),
        "entity_words": entity_query(question, read.title, read_text),
        "question_words": " ".join(content_words(question)[:12]) or question,
    }


class ProbeEpisode(TypedDict):
    """One question lacking a gold paragraph after the first searches."""

    question_id: str
    question: str
    missing: list[str]
    """The missing gold paragraphs' titles."""
    read: str
    """The title of the paragraph read."""
    queries: dict[str, str]
    """Each candidate query of ``QUERIES``."""
    names_a_missing_title: bool
    found: dict[str, dict[str, bool]]
    """Per candidate query and retriever: whether its search found a missing gold paragraph."""


class ProbeReport(TypedDict):
    """``probe``'s report (its docstring)."""

    k: int
    questions: int
    lacking: int
    names_a_missing_title: int
    found: dict[str, dict[str, int]]
    """Per candidate query: the questions it found new gold for, per retriever and either."""
    deeper: dict[str, int]
    episodes: list[ProbeEpisode]


class BridgeProbeReport(ProbeReport):
    """``run_probe``'s report: the dataset and split (its first keys), then ``probe``'s."""

    dataset: str
    split: str


def probe(index: SearchIndex, questions: Sequence[Question], k: int = 5) -> ProbeReport:
    """The report: per candidate query and retriever, on how many of the questions lacking a
    gold paragraph after the first searches it found one; the ``deeper`` control; each such
    question's queries and findings (``episodes``)."""
    corpus = index.corpus
    texts = [q.question for q in questions]
    first = {r: index.search(texts, r, k=k) for r in RETRIEVERS}
    lacking = []
    for i, question in enumerate(questions):
        hits = first[Retriever.DENSE][i] + first[Retriever.BM25][i]
        missing = corpus.gold_paragraph_ids(question) - {h.paragraph_id for h in hits}
        if missing and hits:
            read = hits[0]
            text = corpus.paragraph_text(read.paragraph_id)
            queries = next_hop_queries(question.question, hits, read, text)
            lacking.append((question, missing, read, queries, text))
    episodes: list[ProbeEpisode] = [
        {
            "question_id": q.question_id,
            "question": q.question,
            "missing": sorted(corpus.title(p) for p in missing),
            "read": read.title,
            "queries": queries,
            "names_a_missing_title": any(
                name.lower() in {corpus.title(p).lower() for p in missing}
                for name in named_entities(
                    text, exclude=f"{q.question} {read.title}", same_as=read.title
                )
            ),
            "found": {},
        }
        for q, missing, read, queries, text in lacking
    ]
    for name in QUERIES:
        for retriever in RETRIEVERS:
            results = index.search([e["queries"][name] for e in episodes], retriever, k=k)
            for episode, (_, missing, *_), hits in zip(episodes, lacking, results, strict=True):
                found = bool(missing & {h.paragraph_id for h in hits})
                episode["found"].setdefault(name, {})[str(retriever)] = found
    deeper_found = [set() for _ in lacking]
    deeper = {}
    for retriever in RETRIEVERS:
        results = index.search([q.question for q, *_ in lacking], retriever, k=2 * k)
        for i, ((_, missing, *_), hits) in enumerate(zip(lacking, results, strict=True)):
            if missing & {h.paragraph_id for h in hits[k:]}:
                deeper_found[i].add(str(retriever))
        deeper[str(retriever)] = sum(str(retriever) in found for found in deeper_found)
    deeper["either"] = sum(bool(found) for found in deeper_found)
    return {
        "k": k,
        "questions": len(questions),
        "lacking": len(episodes),
        "names_a_missing_title": sum(e["names_a_missing_title"] for e in episodes),
        "found": {
            name: {
                **{str(r): sum(e["found"][name][str(r)] for e in episodes) for r in RETRIEVERS},
                "either": sum(any(e["found"][name].values()) for e in episodes),
            }
            for name in QUERIES
        },
        "deeper": deeper,
        "episodes": episodes,
    }


def run_probe(config: BridgeProbeConfig) -> BridgeProbeReport:
    """``probe`` of the configured split's questions in its index, the report naming both;
    a missing index fails first, saying how to build it."""
    dataset, split = config.dataset, config.split
    directory = Path(config.index_dir or default_index_dir(dataset.name, split))
    if not directory.is_dir():
        raise FileNotFoundError(
            f"no index at {directory}: build it with python scripts/build_index.py "
            f"dataset={dataset.name} split={split}, or set index_dir="
        )
    questions, _ = read_questions(dataset, split)
    if config.n:
        questions = sample_questions(questions, config.n, seed=config.seed)
    report = probe(CorpusIndex.load(directory), questions, k=config.k)
    return {"dataset": str(dataset.name), "split": split, **report}


def table(report: ProbeReport) -> str:
    """The report as a markdown table: new gold found per query and retriever."""
    lacking = report["lacking"]
    lines = [
        f"{report['questions']} questions; {lacking} lack a gold paragraph after a semantic and "
        f"a keyword search on the question (top-{report['k']} each); the paragraph read names "
        f"a missing gold paragraph's title in {report['names_a_missing_title']}",
        "",
        "| next hop's query | keyword_search | semantic_search | either |",
        "|---|---|---|---|",
    ]
    for name, found in report["found"].items():
        cells = [found[str(r)] for r in RETRIEVERS] + [found["either"]]
        lines.append(f"| {name} | " + " | ".join(f"{c} of {lacking}" for c in cells) + " |")
    deeper = [report["deeper"][str(r)] for r in RETRIEVERS] + [report["deeper"]["either"]]
    lines.append(
        f"| (deeper: the question's hits {report['k'] + 1}-{2 * report['k']}) | "
        + " | ".join(f"{c} of {lacking}" for c in deeper)
        + " |"
    )
    return "\n".join(lines)
