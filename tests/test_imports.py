"""The package's imports point one way, layer by layer, and form no circle.

Every ``import`` of a grasp module by another (at module level or inside a function, type-only
ones included, absolute or relative) is read from the source. A module may import its own layer
or a lower one; within a layer, no circle. Every module is in a layer of ``LAYERS``: a new
package must be placed there before it can pass. The checks are tested on small graphs and
sources of their own, an upward import among them, so that a check that cannot fail is seen.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import grasp

PACKAGE = Path(grasp.__file__).parent
ROOT = "grasp"
"""The root package: in LAYERS it names its ``__init__`` alone, not the modules below it."""

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


def imports_in(source: str, module: str, is_package: bool = False) -> set[str]:
    """The grasp modules that ``source``, the text of ``module``, imports: absolute imports
    and relative ones (``from . import x``, ``from ..env import y``), resolved against the
    package ``module`` is in (``module`` itself when ``is_package``: an ``__init__``)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join(part for part in (*anchor, base) if part)
            if base.split(".")[0] == "grasp":
                found.update(resolve(f"{base}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(resolve(a.name) for a in node.names if a.name.split(".")[0] == "grasp")
    found.discard(None)
    found.discard(module)
    return found  # type: ignore[return-value]


def imports_of(module: str) -> set[str]:
    path = MODULES[module]
    return imports_in(path.read_text(), module, is_package=path.name == "__init__.py")


def layer(module: str) -> int:
    """The layer of ``module``: that of the longest entry of LAYERS naming it or a package
    above it. The root package ``grasp`` (its ``__init__``) names itself only, so a package
    that no entry names is in no layer, rather than silently in the lowest."""
    best = (-1, -1)
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            below = prefix != ROOT and module.startswith(prefix + ".")
            if module == prefix or below:
                best = max(best, (len(prefix), number))
    if best[1] < 0:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return best[1]


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_is_in_a_layer():
    assert all(layer(module) >= 0 for module in MODULES)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import in ``graph`` of a module of a higher layer than the importer's."""
    return sorted(
        f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})"
        for module, targets in graph.items()
        for target in targets
        if layer(target) > layer(module)
    )


def test_no_module_imports_a_higher_layer():
    assert upward_imports(GRAPH) == []


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
    graph = {"grasp.eval.protocol": {"grasp.train.trainer", "grasp.types"}}
    assert upward_imports(graph) == [
        "grasp.eval.protocol (layer 8) imports grasp.train.trainer (layer 9)"
    ]
    assert "grasp.types" in GRAPH["grasp.reward"]


def test_a_package_outside_the_layers_is_refused():
    assert layer("grasp") == 0
    assert layer("grasp.types") == 0
    assert layer("grasp.train.trainer") == 9
    with pytest.raises(AssertionError, match="grasp.newpkg.mod is in no layer"):
        layer("grasp.newpkg.mod")


@pytest.mark.parametrize(
    ("source", "module", "is_package", "expected"),
    [
        (
            "from .run_folder import RunResults",
            "grasp.train.trainer",
            False,
            {"grasp.train.run_folder"},
        ),
        ("from . import run_folder", "grasp.train.trainer", False, {"grasp.train.run_folder"}),
        (
            "from ..eval.results import Interval",
            "grasp.train.trainer",
            False,
            {"grasp.eval.results"},
        ),
        ("from ..train import trainer", "grasp.eval.protocol", False, {"grasp.train.trainer"}),
        ("from .trainer import run_training", "grasp.train", True, {"grasp.train.trainer"}),
        ("from .. import types", "grasp.train", True, {"grasp.types"}),
        (
            "import grasp.types\nfrom grasp.env import tools",
            "grasp.reward",
            False,
            {"grasp.types", "grasp.env.tools"},
        ),
        ("from json import dumps\nfrom . import x_not_a_module", "grasp.reward", False, {"grasp"}),
    ],
)
def test_relative_imports_are_read(source, module, is_package, expected):
    assert imports_in(source, module, is_package) == expected


def test_a_relative_upward_import_is_reported():
    graph = {
        "grasp.eval.protocol": imports_in("from ..train import trainer", "grasp.eval.protocol")
    }
    assert upward_imports(graph) == [
        "grasp.eval.protocol (layer 8) imports grasp.train.trainer (layer 9)"
    ]
