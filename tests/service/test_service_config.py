"""A service command with a setting it cannot use (a variable, a database, an address) stops with one
line naming the setting and the problem, and exit 2: serve, worker, keys and uploads alike."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from framejudge.service.settings import Settings, SettingsError

ROOT = Path(__file__).parents[2]
COMMANDS = [["serve", "--port", "0"], ["worker"], ["keys", "list"], ["keys", "create"], ["uploads", "prune"]]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
            "FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp_path / 'db.sqlite'}"}
    return subprocess.run([sys.executable, "-m", "framejudge.cli", *args], capture_output=True, text=True,
                          timeout=120, env={**base, **env}, cwd=tmp_path)


def one_error_line(proc: subprocess.CompletedProcess[str], start: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {start}"), proc.stderr


def bad_databases(tmp_path: Path) -> dict[str, tuple[str, str]]:
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "not-a-db.sqlite").write_text("this is not SQLite\n" * 100)
    return {
        "under a file": (f"sqlite:///{tmp_path / 'a-file' / 'db.sqlite'}", "a-file is not a folder"),
        "a folder": (f"sqlite:///{tmp_path}", "unable to open database file"),
        "not a database": (f"sqlite:///{tmp_path / 'not-a-db.sqlite'}", "file is not a database"),
        "not a URL": ("nonsense", "Could not parse"),
        "unreachable PostgreSQL": (f"postgresql+psycopg://fj:s3cret@127.0.0.1:{closed_port()}/fj", "Connection refused"),
    }


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("case", ["under a file", "a folder", "not a database", "not a URL", "unreachable PostgreSQL"])
def test_an_unusable_database_names_the_variable(tmp_path, command, case):
    url, words = bad_databases(tmp_path)[case]
    proc = run(command, {"FRAMEJUDGE_SERVICE_DB": url}, tmp_path)
    one_error_line(proc, "FRAMEJUDGE_SERVICE_DB: cannot open the database ")
    assert words in proc.stderr and "s3cret" not in proc.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("var, value, words", [
    ("FRAMEJUDGE_RATE_LIMIT", "abc", "valid integer"),
    ("FRAMEJUDGE_DECODE_WORKERS", "0", "greater than or equal to 1"),
    ("FRAMEJUDGE_MEDIA_ROOT", "/nonexistent-media", "/nonexistent-media: no such folder"),
])
def test_a_bad_variable_is_one_line(tmp_path, command, var, value, words):
    proc = run(command, {var: value}, tmp_path)
    one_error_line(proc, f"{var}: ")
    assert words in proc.stderr


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_serve_refuses_a_port_out_of_range(tmp_path, port):
    one_error_line(run(["serve", "--port", port], {}, tmp_path), f"--port: {port} is not a TCP port (0 to 65535)")


def test_serve_on_an_address_in_use_or_unknown(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run(["serve", "--port", str(port)], {}, tmp_path)
    one_error_line(proc, f"--host/--port: cannot listen on 127.0.0.1 port {port}: Address already in use")
    one_error_line(run(["serve", "--host", "no-such-host.invalid", "--port", "0"], {}, tmp_path),
                   "--host/--port: cannot listen on no-such-host.invalid port 0")


@pytest.mark.parametrize("var, value, words", [
    ("FRAMEJUDGE_MEDIA_ROOT", "FILE", "is not a folder"),
    ("FRAMEJUDGE_UPLOAD_DIR", "FILE", "is not a folder"),
    ("FRAMEJUDGE_SERVICE_JUDGES", "reference,oracle", "unknown judge 'oracle'"),
    ("FRAMEJUDGE_URL_HOSTS", "https://media.example.com/", "is not a host name"),
    ("FRAMEJUDGE_URL_HOSTS", "media.example.com:0", "the port must be a number from 1 to 65535"),
    ("FRAMEJUDGE_URL_HOSTS", "media.example.com:http", "the port must be a number from 1 to 65535"),
    ("FRAMEJUDGE_URL_HOSTS", "[::1", "is not a host name"),
    ("FRAMEJUDGE_DECODE_TIMEOUT", "inf", "finite number"),
    ("FRAMEJUDGE_LEASE_SECONDS", "nan", "finite number"),
    ("FRAMEJUDGE_MAX_UPLOAD_MB", "inf", "not a number of megabytes"),
])
def test_settings_that_would_fail_later_are_refused_up_front(monkeypatch, tmp_path, var, value, words):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv(var, str(tmp_path / "file") if value == "FILE" else value)
    with pytest.raises(SettingsError, match=f"^{var}: .*{words}"):
        Settings.from_env()


def test_good_hosts_and_judges_pass(monkeypatch, tmp_path):
    monkeypatch.setenv("FRAMEJUDGE_URL_HOSTS", "media.example.com:8080, *.cdn.example.com, 10.0.0.7, [::1]:9000, ::1")
    monkeypatch.setenv("FRAMEJUDGE_SERVICE_JUDGES", "reference, litellm:openai/gpt-4o, transformers:smollm2")
    monkeypatch.setenv("FRAMEJUDGE_MEDIA_ROOT", str(tmp_path))
    s = Settings.from_env()
    assert s.url_hosts == ["media.example.com:8080", "*.cdn.example.com", "10.0.0.7", "[::1]:9000", "[::1]"]
    assert s.url_hosts[-1] == "[::1]" and s.judges[-1] == "transformers:smollm2" and s.media_root == tmp_path
