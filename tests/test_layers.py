"""Import layers: a module imports only from its own layer or the layers below it.

From the bottom: the shared types, ``ingest``, the analysis, ``rules``, ``engine``, then
``report`` / ``batch`` / ``frame`` / ``notebook``, then ``cli`` (docs/architecture.md). Every
import counts, also one inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "forensics"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("shared types", ("forensics.model", "forensics.findings", "forensics.errors",
                      "forensics.resources", "forensics.redact", "forensics.knowledge_cache")),
    ("ingest", ("forensics.ingest", "forensics.archive", "forensics.locations",
                "forensics.remote")),
    ("analysis", ("forensics.analysis", "forensics.timeline")),
    ("rules", ("forensics.rules",)),
    ("engine", ("forensics.engine", "forensics.config")),
    ("outputs", ("forensics.report", "forensics.batch", "forensics.frame", "forensics.notebook",
                 "forensics.index", "forensics.charts", "forensics.cases", "forensics.evaluation",
                 "forensics.output", "forensics.inputs", "forensics.baseline",
                 "forensics.hooks", "forensics.cluster", "forensics.dataset",
                 "forensics.destination")),
    ("cli", ("forensics.cli", "forensics._typer_coercion")),
]


def layer_of(module: str) -> int | None:
    for level, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every ``forensics`` import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            # `from forensics import report` imports the module forensics.report
            target = next((n for n in names[1:] if layer_of(n) is not None), node.module)
            out.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
    return [(line, m) for line, m in out if m == "forensics" or m.startswith("forensics.")]


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "_data" not in p.parts)


def test_every_module_has_a_layer() -> None:
    unplaced = [module_name(p) for p in SOURCES
                if module_name(p) != "forensics" and layer_of(module_name(p)) is None]
    assert not unplaced, f"place these modules in a layer (tests/test_layers.py): {unplaced}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: module_name(p))
def test_imports_go_down_the_layers(path: Path) -> None:
    here = layer_of(module_name(path))
    if here is None:  # the package's lazy front door
        return
    wrong = []
    for line, target in imports_of(path):
        there = layer_of(target)
        if there is not None and there > here:
            wrong.append(f"line {line}: {target} ({LAYERS[there][0]}) from "
                         f"{LAYERS[here][0]}")
    assert not wrong, f"{module_name(path)} imports upward: {wrong}"


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The walk finds imports inside functions (the way ``model`` once imported ``notebook``)."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from forensics.notebook import session_html\n")
    assert imports_of(source) == [(2, "forensics.notebook.session_html")]
    assert layer_of("forensics.notebook.session_html") > layer_of("forensics.model")
