"""The README stays a few screens long, links pages that exist, and its data-flow table names
functions that are where it says they are (a rename or a move fails here, not in a reader's
hands)."""

from __future__ import annotations

import re

from grasp.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
MAX_BYTES = 12_000


def _hops() -> list[tuple[str, str]]:
    """(file, symbol) pairs of the data-flow table: a `path.py` followed by a `Name`."""
    text = README.read_text()
    table = text.split("## From a question to a policy update", 1)[1].split("\n## ", 1)[0]
    pairs = re.findall(r"`(grasp/[\w/]+\.py)` `([\w.]+)`", table)
    return pairs


def test_the_readme_is_short_and_its_pages_exist():
    assert README.stat().st_size <= MAX_BYTES
    text = README.read_text()
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert {"docs/retrieval.md", "docs/evaluation.md", "docs/training.md"} <= set(links)
    assert [link for link in links if not (REPO_ROOT / link).is_file()] == []
    assert "make demo" in text and "make test" in text


def test_every_hop_of_the_data_flow_is_defined_where_the_readme_says():
    hops = _hops()
    assert len(hops) >= 8
    missing = []
    for path, symbol in hops:
        source = (REPO_ROOT / path).read_text()
        name = symbol.split(".")[-1]
        if not re.search(rf"^\s*(def|class) {name}\b|^\s*{name}\s*[:=]", source, re.MULTILINE):
            missing.append(f"{path}: {symbol}")
    assert missing == []
