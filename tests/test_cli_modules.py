"""The command line's modules: one per command or command group, attached to the app in one place
(framejudge.cli.app), none importing back from the package."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

import framejudge.cli
from framejudge.cli import app

ROOT = Path(__file__).parents[1]
MODULES = {m.name for m in pkgutil.iter_modules(framejudge.cli.__path__)}


@pytest.mark.parametrize("module", sorted(MODULES - {"__main__"}))
def test_no_module_imports_from_the_package(module):
    tree = ast.parse((Path(framejudge.cli.__file__).parent / f"{module}.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
            assert {a.name for a in node.names} <= MODULES, (module, [a.name for a in node.names])


def test_every_command_is_attached():
    from typer.main import get_command

    commands = get_command(app).commands
    assert set(commands) == {"frames", "grade", "calibrate", "serve", "worker", "align", "leaderboard", "compare",
                             "triage", "examples", "rubrics", "mcq", "keys", "uploads", "labels"}

