"""The package's layers, checked on its import graph.

The contract is `[tool.importlinter]` in pyproject.toml: from top to bottom cli, service,
workflows, leaderboard, runner, calibration, judge, then rubrics | frame_sampler, the leaves
(records | endpoint | examples, then files | env | db), schema, and below it the judge backends'
table and config | errors. A package imports only packages below it; packages on one line (`|`)
do not import each other. The contract is exhaustive: a new top-level package or module fails it
until it is given its place.

Every import counts for the contract, as import-linter (grimp's graph) sees it: at module level,
inside functions, and under TYPE_CHECKING (exclude_type_checking_imports is off). An import
deferred into a function is still a dependency, so one that goes up the layers breaks the
contract unless the contract's `ignore_imports` lists it, each with its reason (today: the
offline fit of the reference judge's confidence, which chooses thresholds as calibration does, and
the queue worker running the review queue's align jobs).

Beside the contract: no import cycle between framejudge's top-level packages among the imports
that run when a module is imported (module level; those inside functions and under TYPE_CHECKING
left out), and reading verdicts and labels files loads no video library.
"""

from __future__ import annotations

import ast
import itertools
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import grimp

import framejudge

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "framejudge"


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter on this checkout's package."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_packages_keep_their_layers():
    run = _run(["-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
                "--config", str(ROOT / "pyproject.toml"), "--no-cache", "--no-logo"])
    assert run.returncode == 0, f"the layers contract (pyproject.toml, [tool.importlinter]) is broken:\n{run.stdout}{run.stderr}"
    assert "1 kept, 0 broken" in run.stdout, run.stdout


def _source(module: str) -> Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@cache
def _deferred_lines(module: str) -> frozenset[int]:
    """The lines of the module's import statements inside functions (run when called, not when
    the module is imported)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(_source(module).read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return frozenset(lines)


def _module_level_graph() -> grimp.ImportGraph:
    assert Path(framejudge.__file__).resolve() == _source(PACKAGE), "grimp would read another checkout"
    graph = grimp.build_graph(PACKAGE, exclude_type_checking_imports=True, cache_dir=None)
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            details = graph.get_import_details(importer=importer, imported=imported)
            if details and all(d["line_number"] in _deferred_lines(importer) for d in details):
                graph.remove_import(importer=importer, imported=imported)
    return graph


def test_no_import_cycle_between_top_level_packages_at_module_level():
    graph = _module_level_graph()
    tops = sorted(graph.find_children(PACKAGE))
    assert {"framejudge.judge", "framejudge.runner", "framejudge.records", "framejudge.schema"} <= set(tops)
    cycles = []
    for a, b in itertools.combinations(tops, 2):
        there = graph.find_shortest_chain(a, b, as_packages=True)
        back = graph.find_shortest_chain(b, a, as_packages=True)
        if there and back:
            cycles.append(f"{' -> '.join(there)}\n  and back: {' -> '.join(back)}")
    assert not cycles, "import cycles between top-level packages at module level:\n" + "\n".join(cycles)


def test_reading_verdicts_and_labels_files_loads_no_video_library():
    """Calibration and the leaderboard read verdicts (JSON lines) through framejudge.records: no
    judge pipeline, frame sampler, PyAV, process pool or disk cache behind them."""
    readers = ["framejudge.records", "framejudge.calibration.inputs", "framejudge.calibration.audit",
               "framejudge.calibration.triage", "framejudge.calibration.reliability",
               *(f"framejudge.leaderboard.{m}" for m in ("inputs", "plan", "compare", "board", "stats", "page"))]
    unwanted = ["av", "pebble", "diskcache", "framejudge.judge", "framejudge.frame_sampler", "framejudge.runner"]

    def loaded(modules: list[str]) -> list[str]:
        run = _run(["-c", f"import sys, {', '.join(modules)}; print(*(m for m in {unwanted!r} if m in sys.modules))"])
        assert run.returncode == 0, run.stderr
        return run.stdout.split()

    if loaded(readers):  # which of them: each in an interpreter of its own
        assert not {r: found for r in readers if (found := loaded([r]))}, "readers that load these"
