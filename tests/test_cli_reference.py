"""The command-line reference in the docs (docs/cli.md) is generated from the CLI itself, so every
command and option is in it as its --help shows it. Regenerate it with
`.venv/bin/typer framejudge.cli utils docs --name framejudge --output docs/cli.md`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def test_the_cli_reference_is_the_cli_as_it_is(tmp_path):
    typer = shutil.which("typer", path=str(Path(sys.executable).parent))
    if typer is None:
        pytest.skip("the typer command is not installed beside this Python")
    out = tmp_path / "cli.md"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRAMEJUDGE_")}
    proc = subprocess.run([typer, "framejudge.cli", "utils", "docs", "--name", "framejudge", "--output", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**env, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == (ROOT / "docs" / "cli.md").read_text(), (
        "docs/cli.md is not the CLI as it is: regenerate it with "
        "`.venv/bin/typer framejudge.cli utils docs --name framejudge --output docs/cli.md`")
    for option in ("--max-in-flight", "--scene-threshold", "--gold-field", "--overwrite", "--log-json"):
        assert f"`{option}" in out.read_text(), option
