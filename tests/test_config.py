"""One home for settings: every FRAMEJUDGE_* variable the package, the CLI and the service read is
declared once in framejudge.config, and what reads it comes from there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from framejudge import config
from framejudge.service.settings import ENV, Settings

ROOT = Path(__file__).parents[1]
NAMED = re.compile(r"FRAMEJUDGE_[A-Z0-9_]*[A-Z0-9]\b")


def _sources() -> dict[Path, str]:
    return {p: p.read_text() for folder in ("framejudge", "bench") for p in (ROOT / folder).rglob("*.py")}


def test_every_variable_named_in_the_code_is_declared():
    undeclared = sorted({f"{path.relative_to(ROOT)}: {name}" for path, text in _sources().items()
                         for name in NAMED.findall(text) if name not in config.BY_NAME})
    assert not undeclared, "\n".join(undeclared)


def test_every_declared_variable_is_read_somewhere():
    sources = "\n".join(text for path, text in _sources().items() if path.name != "config.py")
    unused = [v.name for v in config.VARIABLES if v.name not in sources and v.setting is None]
    assert not unused
    assert len(config.BY_NAME) == len(config.VARIABLES)  # each once


def test_the_service_reads_its_variables_from_the_table():
    for name, field in config.SERVICE_SETTINGS.items():
        assert field in Settings.model_fields, name
        assert ENV.get(name, field) == field
    assert set(ENV) == {n for n, f in config.SERVICE_SETTINGS.items() if f != "max_upload_bytes"}


def test_the_cli_options_read_declared_variables():
    from framejudge.cli import app

    command = typer.main.get_command(app)
    seen = []

    def walk(cmd):
        for param in getattr(cmd, "params", []):
            for var in [param.envvar] if isinstance(param.envvar, str) else param.envvar or []:
                seen.append(var)
                assert var in config.BY_NAME, f"{cmd.name} --{param.name}: {var} is not declared"
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(command)
    assert {"FRAMEJUDGE_JUDGE", "FRAMEJUDGE_RUBRIC", "FRAMEJUDGE_JUDGES_FILE", "FRAMEJUDGE_API_BASE"} <= set(seen)


def test_an_undeclared_variable_cannot_be_read():
    with pytest.raises(KeyError):
        config.get("FRAMEJUDGE_NOT_A_SETTING")


def test_the_documented_table_lists_every_variable():
    table = config.markdown()
    assert all(f"`{v.name}`" in table for v in config.VARIABLES)
    docs = ROOT / "docs" / "configuration.md"
    assert table in docs.read_text(), "docs/configuration.md: paste framejudge.config.markdown() in again"
