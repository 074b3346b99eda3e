"""The results of an evaluation as types: what results.json holds, written and read in one place.

    summary = summarize(trajectories, scores)            # Summary: em, f1, jd, recall, ...
    DatasetEvaluation.from_json(json.loads(text))        # <out>/<dataset>/results.json
    EvaluationResults.from_json(json.loads(text))        # <out>/results.json, every dataset

Each type's ``to_json`` gives the JSON object results.json holds, keys in the order of the
fields, and ``from_json`` reads it back. A mean is a number, or a string saying why there is
none (``NOT_COMPUTED``, ``NO_VERDICTS``, ``NOT_AVAILABLE``, ``NOT_RECORDED``).
Fields added after results were committed (``newer_field``) default to None, "not recorded",
when a file lacks them; such a field is left out of ``to_json`` while it is None, so a file
read back is written out as it was. A key that no field names is an error: a file written by
other code is not silently half read.

An evaluation folder's file names are spelled here (``RESULTS_FILE``, ``CONFIG_FILE``), once:
every module that writes or reads one imports them (grasp/train/run_folder.py does the same
for a training run's folder).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict, TypeVar

R = TypeVar("R", bound="JsonRecord")

RESULTS_FILE = "results.json"
"""In an evaluation folder (a dataset's, or the pooled one above them): its results, the types
below."""
CONFIG_FILE = "config.json"
"""In an evaluation folder: the configuration that shapes its trajectories (its fingerprint)."""

NOT_COMPUTED = "not computed"
"""JD when no judge is configured."""
NO_VERDICTS = "no parseable verdicts"
"""JD when a judge ran but no episode got a yes, no or no-answer verdict."""
NOT_AVAILABLE = "not available"
"""Supporting-sentence recall of episodes without sentence-level supporting facts."""
NOT_RECORDED = "not recorded"
"""A cost the run did not measure: token counts of policies without token ids (chat-level
backends, the scripted agent, baselines), wall time of batches whose log line was lost."""

Mean = float | str
"""A mean, or why there is none ("not computed", "not available", "not recorded")."""


OMITTED_WHEN_NONE = "omitted_when_none"
"""Field metadata: the key is left out of ``to_json`` while the field is None."""


def newer_field() -> Any:
    """A field that results.json files written before it existed lack: None when absent."""
    return field(default=None, metadata={OMITTED_WHEN_NONE: True})


def optional_field(decode: Callable[[Any], Any] | None = None) -> Any:
    """A field that some files lack by design (a run evaluated only after training has no
    ``before``): None when absent, and left out of ``to_json`` while None, as a newer field is.
    ``decode`` turns a present value into the field's type."""
    metadata = {OMITTED_WHEN_NONE: True, **({"decode": decode} if decode is not None else {})}
    return field(default=None, metadata=metadata)


def _encode(value: Any) -> Any:
    if isinstance(value, JsonRecord):
        return value.to_json()
    if isinstance(value, Mapping):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    return value


class JsonRecord:
    """``to_json`` and ``from_json`` of a dataclass whose fields are results.json's keys.

    A field's ``decode`` metadata turns its JSON value into the field's type (the default
    keeps it as it is).
    """

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and f.metadata.get(OMITTED_WHEN_NONE):
                continue
            out[f.name] = _encode(value)
        return out

    @classmethod
    def from_json(cls: type[R], data: Mapping[str, Any]) -> R:
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        names = {f.name for f in fields}
        unknown = [key for key in data if key not in names]
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown keys {unknown}")
        missing = [
            f.name
            for f in fields
            if f.name not in data
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise ValueError(f"{cls.__name__}: missing keys {missing}")
        values = {
            f.name: f.metadata.get("decode", _same)(data[f.name]) for f in fields if f.name in data
        }
        return cls(**values)


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Interval(JsonRecord):
    """A mean with its 95% bootstrap interval over ``n`` episodes (macro: over datasets'
    episodes, stratified)."""

    mean: float
    low: float
    high: float
    n: int


def _intervals(data: Mapping[str, Any]) -> dict[str, Interval]:
    return {key: Interval.from_json(value) for key, value in data.items()}


def _decoded(decode: Callable[[Any], Any]) -> dict[str, Any]:
    return {"decode": decode}


class PolicyExtra(TypedDict, total=False):
    """What policies reported in their trajectories' ``extra``, over an evaluation's episodes
    (``grasp.eval.summary.extra_summary``); empty when nothing was reported."""

    routes: dict[str, float]
    """Share of episodes per Adaptive-RAG route."""
    backend_calls_per_episode: float
    backend_prompt_tokens_per_episode: float
    backend_generated_tokens_per_episode: float
    trigger_rate: float
    """Share of the episodes that graded hits whose rewrite trigger fired."""
    trigger_episodes: int
    context_recall: float
    """Mean recall of the gold paragraphs among those the backend answered from."""
    context_recall_episodes: int


@dataclass(kw_only=True)
class Summary(JsonRecord):
    """``grasp.eval.summary.summarize`` of a set of trajectories: quality, tool use, tokens.

    The mean metrics come first (em, f1, jd, recall ...), in results.json's order.
    """

    em: float
    f1: float
    jd: Mean
    """The judge's mean; "not computed" without a judge, "no parseable verdicts"."""
    recall: float
    """Gold paragraphs found by any tool, per episode."""
    recall_all_gold: float
    read_recall: float
    read_recall_all_gold: float
    supporting_sentence_recall: Mean
    """"not available" when no episode has sentence-level supporting facts."""
    supporting_sentence_all_found: Mean
    em_comparison: Mean | None = newer_field()
    """EM over the comparison questions (``grasp.eval.summary.COMPARISON_TYPES``); "not
    available" when there are none; None: written before it was recorded."""
    em_other: Mean | None = newer_field()
    """EM over the other questions (every other type, MuSiQue's included)."""
    containment: float | None = newer_field()
    """Answers that contain a gold answer as whole tokens (``grasp.metrics.answer_contains``);
    None: written before it was recorded."""
    ci: dict[str, Interval] = field(metadata=_decoded(_intervals))
    """The interval of every numeric mean, by metric."""
    judge: dict[str, int] | None
    """Episodes by verdict; None without a judge."""
    supporting_sentence_episodes: int
    comparison_episodes: int | None = newer_field()
    """Episodes ``em_comparison`` is over; None: question types unknown, or written before."""
    other_episodes: int | None = newer_field()
    """Episodes ``em_other`` is over; None likewise."""
    reward: dict[str, float]
    """Mean of each ``reward/*`` term."""
    reward_ci: dict[str, Interval] = field(metadata=_decoded(_intervals))
    tool_calls_per_episode: dict[str, float]
    """Valid calls by tool; a read_paragraph call its tool refused counts too (the reads
    that ran and those refused are apart in ``reads_*_per_episode``)."""
    reads_run_per_episode: float | None = newer_field()
    """read_paragraph calls that ran, per episode; None: written before it was recorded."""
    reads_refused_per_episode: float | None = newer_field()
    """read_paragraph calls refused with an error observation, per episode."""
    parse_error_rate: float
    invalid_call_rate: float
    repaired_call_rate: float | None = newer_field()
    """Turns whose call parsed only after a repair (``env.repair_calls``), per turn; they are
    not parse errors. None: written before it was recorded."""
    errors: dict[str, int]
    stop_reasons: dict[str, float]
    """Share of episodes by stop reason."""
    turns_per_episode: float
    generated_tokens_per_episode: Mean
    completion_tokens_per_episode: Mean
    prompt_tokens_per_episode: Mean
    token_episodes: int | None = newer_field()
    """Episodes the token means are over; None: written before it was recorded."""
    episodes: int
    policy_extra: PolicyExtra
    """What baselines reported in their trajectories' ``extra`` (routes, backend calls)."""

    def summary_fields(self) -> dict[str, Any]:
        """The fields of ``Summary`` (not a subclass's), to build a subclass from them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(Summary)}


@dataclass(frozen=True)
class RolloutTime(JsonRecord):
    """Where the rollout's seconds went (``rollout_time_s`` of results.json)."""

    generation: float
    environment: float
    environment_share: float
    """environment / (generation + environment); 0.0 when nothing was timed."""


@dataclass(kw_only=True)
class DatasetResults(Summary):
    """One dataset's summary with its cost: what its results.json holds, bar the config and
    provenance (``DatasetEvaluation``), and one entry of ``EvaluationResults.datasets``."""

    scoring_time_s: float
    wall_time_s: float
    """Rollout seconds over the logged batches of the kept questions (every run's)."""
    wall_time_per_question_s: Mean
    """"not recorded" when no batch was timed."""
    rollout_time_s: RolloutTime = field(metadata=_decoded(RolloutTime.from_json))
    questions: int
    questions_rolled_out: int
    """Questions the last run rolled out (the others were in trajectories.jsonl)."""
    questions_timed: int
    """Questions whose batch was logged; fewer than ``questions`` when a log line was lost."""
    rollout_runs: int
    rollout_code: list[Any]
    """The code versions that rolled the questions out (one, unless resumed elsewhere)."""
    generation_errors: int | None = newer_field()
    """Episodes that ended in a generation error; None: written before it was recorded."""
    repeated_lines_dropped: int | None = newer_field()
    """Lines of trajectories.jsonl repeating an episode; None: written before it was."""
    ladder: dict[str, Any] | None = newer_field()
    """The evaluation ladder (``grasp.eval.ladder.ladder_section``: retrieval per search call
    by tool, evidence, failure shares); None: written before it was recorded."""


@dataclass
class DatasetEvaluation(JsonRecord):
    """A dataset's results.json: its results, the config its trajectories were made with
    (config.json) and the provenance (code, policy, judge)."""

    results: DatasetResults
    config: dict[str, Any]
    provenance: dict[str, Any] | None
    KEYS: ClassVar[tuple[str, ...]] = ("config", "provenance")

    def to_json(self) -> dict[str, Any]:  # the results' keys, then config and provenance
        return {**self.results.to_json(), "config": self.config, "provenance": self.provenance}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DatasetEvaluation:  # type: ignore[override]
        results = DatasetResults.from_json({k: v for k, v in data.items() if k not in cls.KEYS})
        return cls(results, data["config"], data["provenance"])


@dataclass(kw_only=True)
class PooledResults(Summary):
    """Every episode of every dataset summarized together, with the summed cost."""

    wall_time_s: float
    questions_rolled_out: int
    questions_timed: int
    wall_time_per_question_s: Mean
    ladder: dict[str, Any] | None = newer_field()
    """The datasets' ladders pooled (``grasp.eval.ladder.pool_sections``); None: written
    before it was recorded, or some dataset has none."""

    @classmethod
    def of(
        cls,
        summary: Summary,
        datasets: Sequence[DatasetResults],
        ladder: dict[str, Any] | None = None,
    ) -> PooledResults:
        """``summary`` of the pooled episodes, with the datasets' seconds and questions summed
        (and ``ladder``, their ladders pooled)."""
        wall = sum(r.wall_time_s for r in datasets)
        timed = sum(r.questions_timed for r in datasets)
        return cls(
            **summary.summary_fields(),
            wall_time_s=wall,
            questions_rolled_out=sum(r.questions_rolled_out for r in datasets),
            questions_timed=timed,
            wall_time_per_question_s=wall / timed if timed else NOT_RECORDED,
            ladder=ladder,
        )


@dataclass
class MacroResults(JsonRecord):
    """The mean over datasets of each dataset's mean, with a stratified interval."""

    means: dict[str, Interval | str]
    """By metric of ``MEAN_METRICS``; "not available" where no dataset has it, "not
    computed" for JD unless every dataset was judged."""
    datasets: dict[str, list[str]]
    """The datasets each metric averages over."""

    def to_json(self) -> dict[str, Any]:
        return {**_encode(self.means), "datasets": self.datasets}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MacroResults:  # type: ignore[override]
        means = {
            key: value if isinstance(value, str) else Interval.from_json(value)
            for key, value in data.items()
            if key != "datasets"
        }
        return cls(means, data["datasets"])


@dataclass
class OverallResults(JsonRecord):
    """All datasets at once: pooled over episodes, and the macro mean over datasets."""

    pooled: PooledResults = field(metadata=_decoded(PooledResults.from_json))
    macro: MacroResults = field(metadata=_decoded(MacroResults.from_json))


def _datasets(data: Mapping[str, Any]) -> dict[str, DatasetResults]:
    return {name: DatasetResults.from_json(value) for name, value in data.items()}


@dataclass
class EvaluationResults(JsonRecord):
    """``<out>/results.json`` of ``scripts/evaluate.py``: every dataset, then all of them."""

    datasets: dict[str, DatasetResults] = field(metadata=_decoded(_datasets))
    overall: OverallResults = field(metadata=_decoded(OverallResults.from_json))
    questions: int
    """Questions over every dataset."""
    config: dict[str, Any]
    """The resolved ``EvaluateConfig``."""
    provenance: dict[str, Any]
    """Code version, policy and judge identity."""
