"""The service's settings from FRAMEJUDGE_* variables: converted and checked by the one Settings
model; a bad value names its variable (exit 2, never a traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from framejudge.service.settings import Settings, SettingsError


def test_variables_become_settings(monkeypatch, tmp_path):
    for var, value in {"FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp_path / 'x.sqlite'}",
                       "FRAMEJUDGE_SERVICE_JUDGES": "reference, litellm:openai/m", "FRAMEJUDGE_URL_ALLOW_PRIVATE": "yes",
                       "FRAMEJUDGE_SERVICE_WORKER": "0", "FRAMEJUDGE_LEASE_SECONDS": "7.5",
                       "FRAMEJUDGE_WORKER_IN_FLIGHT": "12", "FRAMEJUDGE_MAX_UPLOAD_MB": "1.5",
                       "FRAMEJUDGE_JUDGES_FILE": str(tmp_path / "j.yaml")}.items():
        monkeypatch.setenv(var, value)
    s = Settings.from_env()
    assert s.judges == ["reference", "litellm:openai/m"] and s.url_allow_private is True and s.run_worker is False
    assert s.lease_s == 7.5 and s.worker_max_in_flight == 12 and s.max_upload_bytes == int(1.5 * 1024**2)
    assert s.judges_file == tmp_path / "j.yaml"


@pytest.mark.parametrize("var, value, words", [
    ("FRAMEJUDGE_LEASE_SECONDS", "abc", "valid number"), ("FRAMEJUDGE_LEASE_SECONDS", "0.1", "shorter than 3 heartbeats"),
    ("FRAMEJUDGE_LEASE_SECONDS", "2", "a lease of 2 s is shorter than 3 heartbeats"),
    ("FRAMEJUDGE_LEASE_SECONDS", "-5", "shorter than 3 heartbeats"),
    ("FRAMEJUDGE_SERVICE_WORKER", "maybe", "valid boolean"), ("FRAMEJUDGE_MAX_UPLOAD_MB", "lots", "megabytes"),
    ("FRAMEJUDGE_RATE_LIMIT", "0", "greater than or equal to 1"), ("FRAMEJUDGE_URL_DEADLINE", "0", "greater than 0"),
    ("FRAMEJUDGE_URL_DEADLINE", "inf", "finite number"),
])
def test_a_bad_value_names_its_variable(monkeypatch, var, value, words):
    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsError, match=f"^{var}: .*{words}"):
        Settings.from_env()


@pytest.mark.parametrize("command", [["serve"], ["worker"], ["keys", "list"]])
def test_commands_refuse_a_bad_variable_with_an_error_line(tmp_path, command):
    env = {"PATH": "/usr/bin:/bin", "FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "FRAMEJUDGE_DECODE_WORKERS": "none"}
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", *command], capture_output=True, text=True,
                          timeout=120, env=env, cwd=Path(__file__).parents[2])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "error: FRAMEJUDGE_DECODE_WORKERS: Input should be a valid integer" in proc.stderr
