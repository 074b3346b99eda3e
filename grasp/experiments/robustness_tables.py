"""robustness.md: the robustness suite's report (``grasp.experiments.robustness``) as tables.

markdown = robustness_markdown(report.to_json())
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grasp.experiments.sweep import escape_cell, markdown_table


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return escape_cell(str(value))


def _reasons(shares: Mapping[str, float]) -> str:
    return ", ".join(f"{reason} {share:.2f}" for reason, share in shares.items()) or "-"


def robustness_markdown(report: Mapping[str, Any]) -> str:
    """The runs, the injection, the poisoning and the exhaustion tables."""
    config = report["config"]
    policy = report["provenance"].get("policy", config["policy"])
    lines = [
        f"# Robustness: policy {policy.get('kind')} on {report['questions']} "
        f"{config['dataset']} {config['split']} questions",
        "",
        f"Wall time {report['wall_time_s']:.1f} s; attack seed {config['attack_seed']}, "
        f"sample seed {config['seed']}.",
        "",
        "## Runs",
        "",
    ]
    rows = [
        [
            name,
            _number(r["em"]),
            _number(r["f1"]),
            _number(r["recall"]),
            str(r["paragraphs"]),
            _reasons(r["stop_reasons"]),
            _number(r["wall_time_s"]),
        ]
        for name, r in report["runs"].items()
    ]
    header = ["run", "EM", "F1", "recall", "paragraphs", "stop reasons", "wall s"]
    lines += markdown_table(header, rows)
    injection = report["injection"]
    lines += ["", "## Indirect prompt injection", ""]
    rows = [["all kinds", _number(injection["attack_success_rate"])]]
    rows += [[kind, _number(rate)] for kind, rate in injection["by_kind"].items()]
    lines += markdown_table(["injection", "attack success rate"], rows)
    lines += [
        "",
        f"Answered the injected X: {injection['answered_target_rate']:.3f}; made the requested "
        f"call next: {injection['followed_call_rate']:.3f}.",
        "",
    ]
    rows = [
        [
            key,
            _number(injection["clean"][key]),
            _number(injection["attacked"][key]),
            _number(injection["difference"][key]),
        ]
        for key in ("em", "f1", "recall")
    ]
    lines += markdown_table(["metric", "clean", "attacked", "difference"], rows)
    poisoning = report["poisoning"]
    lines += ["", f"## Near-duplicate poisoning ({poisoning['copies']} copies per question)", ""]
    rows = []
    for label in ("detection_off", "detection_on"):
        entry = poisoning[label]
        dropped = (entry["near_duplicates"] or {}).get("paragraphs_dropped", "-")
        shares = ", ".join(f"{t} {s:.2f}" for t, s in entry["top_k_share"].items())
        rows.append(
            [
                label,
                shares,
                _number(entry["episode_hit_share"]),
                _number(entry["answer_changed_rate"]),
                _number(entry["answered_poison_rate"]),
                _number(entry["difference"]["em"]),
                str(dropped),
            ]
        )
    header = [
        "detection",
        "top-K share",
        "episode hits",
        "answer changed",
        "answered poison",
        "EM difference",
        "dropped",
    ]
    lines += markdown_table(header, rows)
    lines += ["", "## Cost exhaustion (no answer in the corpus)", ""]
    rows = [
        [
            name,
            _reasons(e["stop_reasons"]),
            f"{e['ended']}/{e['episodes']}",
            _number(e["turns_per_episode"]),
            _number(e["wall_time_s"]),
        ]
        for name, e in report["exhaustion"].items()
    ]
    lines += markdown_table(["budget run", "stop reasons", "ended", "turns", "wall s"], rows)
    lines += [""] + [f"- {note}" for note in report.get("notes", [])]
    return "\n".join(lines) + "\n"
