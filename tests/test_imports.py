"""The package's imports point one way, layer by layer, and form no circle.

Every ``import`` of a grasp module by another (at module level or inside a function, type-only
ones included) is read from the source. A module may import its own layer or a lower one;
within a layer, no circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import grasp

PACKAGE = Path(grasp.__file__).parent

LAYERS: list[tuple[str, ...]] = [
    (
        "grasp",
        "grasp.types",
        "grasp.paths",
        "grasp.startup",
        "grasp.threads",
        "grasp.compressed",
        "grasp.structured",
    ),
    ("grasp.metrics", "grasp.reward"),
    ("grasp.data", "grasp.models"),
    ("grasp.corpus",),
    ("grasp.serve",),
    ("grasp.env",),
    ("grasp.rollout",),
    ("grasp.baselines",),
    ("grasp.eval",),
    ("grasp.train",),
    ("grasp.experiments",),
    ("grasp.bench", "grasp.report", "grasp.launch", "grasp.config"),
]
"""Lowest first: shared types and paths; rewards and metrics (pure functions of the types);
data and models; the corpus and its indexes; the retrieval service; the environment and its
tools; the rollout; the baselines (policies); the evaluation protocol; training; the
experiments (baseline table, ablations, sweeps, robustness); the entry points' configs,
benchmarks and reports."""


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


MODULES = module_names()


def resolve(name: str) -> str | None:
    """The grasp module an imported name lives in (``grasp.env.tools.TOOLS`` -> its module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "grasp":
                found.update(resolve(f"{node.module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(resolve(a.name) for a in node.names if a.name.split(".")[0] == "grasp")
    found.discard(None)
    found.discard(module)
    return found  # type: ignore[return-value]


def layer(module: str) -> int:
    best = (-1, -1)
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                best = max(best, (len(prefix), number))
    if best[1] < 0:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return best[1]


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_is_in_a_layer():
    assert all(layer(module) >= 0 for module in MODULES)


def test_no_module_imports_a_higher_layer():
    upward = sorted(
        f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})"
        for module, targets in GRAPH.items()
        for target in targets
        if layer(target) > layer(module)
    )
    assert upward == []


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle():
    # grasp/__init__.py imports nothing of the package but grasp.startup; a package's
    # __init__ re-exporting its modules is not a circle of its own.
    assert circles(GRAPH) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": {"a"}, "c": {"c"}}, [["a", "b"]]),
    ],
)
def test_the_circle_finder_finds_circles(graph, expected):
    assert circles(graph) == expected


def test_the_layer_check_sees_an_upward_import():
    assert layer("grasp.eval.protocol") < layer("grasp.train.trainer")
    assert layer("grasp.env.tools") > layer("grasp.types")
    assert "grasp.types" in GRAPH["grasp.reward"]
