"""The service's settings from FRAMEJUDGE_* variables: converted and checked by the one Settings
model; a bad value names its variable (exit 2, never a traceback)."""

from __future__ import annotations

import os
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


def _started(proc: subprocess.Popen, within_s: float = 60) -> list[str]:
    """serve's stderr lines up to the one that says how to stop it (within a minute); a thread
    keeps reading the rest into `proc.said`."""
    import queue
    import threading

    proc.said = queue.Queue()
    threading.Thread(target=lambda: [proc.said.put(line) for line in proc.stderr], daemon=True).start()
    lines: list[str] = []
    while not lines or "stops it" not in lines[-1]:
        try:
            lines.append(proc.said.get(timeout=within_s))
        except queue.Empty:
            raise AssertionError(f"serve said no more than {''.join(lines)!r} in {within_s:g} s") from None
    return lines


def test_serve_says_where_it_listens_its_database_its_keys_and_when_it_stops(tmp_path):
    import re
    import signal
    import urllib.request

    env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "FRAMEJUDGE_UPLOAD_DIR": str(tmp_path / "uploads"), "PYTHONPATH": str(Path(__file__).parents[2])}
    for keys in (0, 1):
        if keys:
            subprocess.run([sys.executable, "-m", "framejudge.cli", "keys", "create"], env=env, check=True,
                           capture_output=True, timeout=60)
        proc = subprocess.Popen([sys.executable, "-m", "framejudge.cli", "serve", "--port", "0"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            lines = _started(proc)
            url = re.match(r"framejudge serve: (http://127\.0\.0\.1:\d+) \(API docs at \1/docs\)$", lines[0]).group(1)
            assert urllib.request.urlopen(url + "/healthz", timeout=10).status == 200  # the URL it said
            assert lines[1].startswith(f"database: sqlite:///{tmp_path / 'db.sqlite'}; jobs are graded here")
            if keys:
                assert lines[2] == "API keys: 1 active (`framejudge keys list`)\n"
            else:
                assert lines[2].startswith("note: no active API key") and "framejudge keys create" in lines[2]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
            assert proc.said.get(timeout=10) == f"framejudge serve: stopped ({url})\n"
        finally:
            proc.kill()
            proc.wait()
