"""The command line's modules: one per command or command group, attached to the app in one place
(framejudge.cli.app), none importing back from the package; and the options whose range Typer
checks are refused before any work, naming the option."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import framejudge.cli
from framejudge.cli import app

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples" / "items.jsonl"
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


@pytest.mark.parametrize("args, option", [
    (["grade", EXAMPLES, "--samples", "0"], "--samples"),
    (["calibrate", "--human", EXAMPLES, "--judge", EXAMPLES, "--replicates", "0"], "--replicates"),
    (["leaderboard", EXAMPLES, "--replicates", "0"], "--replicates"),
    (["leaderboard", EXAMPLES, "--concurrency", "0"], "--concurrency"),
    (["compare", EXAMPLES, EXAMPLES, "--concurrency", "0"], "--concurrency"),
    (["triage", "--human", EXAMPLES, "--judge", EXAMPLES, "--out", "t.json", "--min-units", "0"], "--min-units"),
    (["worker", "--max-in-flight", "0"], "--max-in-flight"),
])
def test_ranges_are_checked_before_any_work(tmp_path, monkeypatch, args, option):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 2, res.output
    said = " ".join(res.stderr.replace("│", " ").split())  # Typer's error box wraps its lines
    assert f"Invalid value for '{option}': Input should be greater than or equal to 1" in said, res.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_python_m_framejudge_is_the_command():
    """`python -m framejudge` runs the command, as the installed script does (the process is the subject)."""
    import subprocess
    import sys

    ran = subprocess.run([sys.executable, "-m", "framejudge", "rubrics", "list", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0 and "Usage: " in ran.stdout and "rubrics list" in ran.stdout, ran.stderr
