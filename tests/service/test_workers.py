"""Workers that can run anywhere: the API server and two `framejudge worker` processes on one
database, grading a job against a slow model server on loopback, while one worker is SIGKILLed and
another is stopped and started again (and, on PostgreSQL, the database restarts). Every item ends
with exactly one record per turn, and the model server saw each item graded once, except the items
the killed worker had in hand."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from bench.model_server import ModelServer
from tests.service.test_durability import Server, _request

pytest.importorskip("litellm")

JUDGE = "litellm:openai/bench"
IN_FLIGHT = 6  # per process: the judges file's max_concurrency


def _items(n: int) -> list[dict]:
    return [{"id": f"i{k}", "turns": [{"question": f"[item i{k}] How many people?", "golden": "2 people.",
                                       "response_a": "There are 2 people.", "response_b": "Three people."}]}
            for k in range(n)]


def _env(tmp_path, database_url: str, base_url: str, lease: float) -> dict[str, str]:
    judges = tmp_path / "judges.yaml"
    judges.write_text(f"judges:\n  - spec: {JUDGE}\n    api_base: {base_url}\n    concurrency: {IN_FLIGHT}\n"
                      f"    max_concurrency: {IN_FLIGHT}\n    timeout_s: 30\n    price: {{}}\n")
    return {**os.environ, "FRAMEJUDGE_SERVICE_DB": database_url, "FRAMEJUDGE_RATE_LIMIT": "100000",
            "FRAMEJUDGE_UPLOAD_DIR": str(tmp_path / "uploads"), "FRAMEJUDGE_JUDGES_FILE": str(judges),
            "FRAMEJUDGE_LEASE_SECONDS": str(lease), "FRAMEJUDGE_WORKER_IN_FLIGHT": str(IN_FLIGHT + 2)}


def _worker(env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("a") as f:  # a file, not a pipe nobody reads: a chatty worker must not block on it
        return subprocess.Popen([sys.executable, "-m", "framejudge.cli", "worker"], env=env,
                                stdout=subprocess.DEVNULL, stderr=f)


def _done(server: Server, key: str, job: str) -> int:
    try:
        return json.loads(_request(f"{server.base}/v1/jobs/{job}", key))["done"]
    except OSError:  # the database restarting: ask again
        return -1


def _wait(server: Server, key: str, job: str, at_least: int, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while _done(server, key, job) < at_least:
        assert time.time() < deadline, f"job stuck below {at_least}"
        time.sleep(0.1)


def _run(tmp_path, database_url: str, lease: float, total: int, restart_database=None) -> tuple[list[dict], Counter]:
    with ModelServer(latency=0.25) as model:
        env = _env(tmp_path, database_url, model.base_url, lease)
        key = subprocess.run([sys.executable, "-m", "framejudge.cli", "keys", "create", "--scope", "grade"],
                             env=env, capture_output=True, text=True, check=True).stdout.strip()
        server = Server(env)
        logs = [tmp_path / "worker-0.log", tmp_path / "worker-1.log"]
        workers = [_worker(env, logs[0]), _worker(env, logs[1])]
        try:
            body = {"items": _items(total), "options": {"swap": True, "cache": False}}
            job = json.loads(_request(f"{server.base}/v1/jobs?judge={JUDGE}", key, json.dumps(body).encode()))["id"]
            _wait(server, key, job, total // 5)
            deadline = time.monotonic() + 120  # both up (on a loaded machine one starts late): each stopped at work
            while not all("grading from" in log.read_text() for log in logs) and time.monotonic() < deadline:
                time.sleep(0.1)
            workers[0].send_signal(signal.SIGKILL)  # dies holding items: they come back when its leases expire
            workers[0].wait(timeout=30)
            workers[1].send_signal(signal.SIGTERM)  # stops cleanly: finishes what it holds
            assert workers[1].wait(timeout=60) == 0, logs[1].read_text()[-2000:]
            _wait(server, key, job, total // 2)
            if restart_database is not None:
                restart_database()
            workers[1] = _worker(env, logs[1])  # started again mid-job
            _wait(server, key, job, total)
            lines = _request(f"{server.base}/v1/jobs/{job}/verdicts", key, accept="application/x-ndjson")
            status = json.loads(_request(f"{server.base}/v1/jobs/{job}", key))
        finally:
            server.proc.terminate()
            server.proc.wait(timeout=60)
            for w in workers:
                if w.poll() is None:
                    w.terminate()
                    w.wait(timeout=60)
        calls = Counter(model.stats()["by_tag"])
    assert status["state"] == "done" and status["judge_errors"] == 0, status
    assert status["options"]["swap"] is True and status["options"]["cache"] is False
    for log in logs:  # a live worker never lost a lease to another
        assert "no longer held" not in log.read_text(), log.read_text()[-2000:]
    return [json.loads(line) for line in lines.decode().splitlines()], calls


def test_api_server_and_two_workers_share_a_job_through_kills_and_restarts(tmp_path, database_url):
    total = 240
    records, calls = _run(tmp_path, database_url, lease=3.0, total=total)
    ids = [r["item_id"] for r in records]
    assert len(ids) == total and len(set(ids)) == total  # exactly one record per item (one turn each)
    assert all(r["record"] == "verdict" and r["swap"]["consistent"] for r in records)
    assert set(calls) == {f"i{k}" for k in range(total)}
    twice = [tag for tag, n in calls.items() if n != 2]  # both orders, once: 2 calls per item
    assert all(calls[tag] > 2 for tag in twice)  # never fewer: every item was graded in full
    assert len(twice) <= IN_FLIGHT + 2, twice  # only what the killed worker had in hand was graded again


def test_workers_ride_out_a_database_restart(tmp_path, postgres):
    total = 120
    records, calls = _run(tmp_path, postgres.new_database(), lease=20.0, total=total,
                          restart_database=postgres.restart)
    ids = [r["item_id"] for r in records]
    assert len(ids) == total and len(set(ids)) == total
    assert all(r["record"] == "verdict" for r in records)
    assert all(calls[f"i{k}"] >= 2 for k in range(total))


def _catches(pid: int, sig: int) -> bool:
    """Whether a process has a handler of its own for `sig` (Linux: /proc/PID/status, SigCgt)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads a process's signal handlers in /proc")
def test_a_worker_told_to_stop_while_it_starts_exits_cleanly(tmp_path):
    """SIGTERM as soon as the command has its handler, while it sets up (the decoding pool, the
    judges, the database; seconds) and before its loop is up: the stop is kept for the loop, so
    the worker starts, holds nothing, says it stopped and exits 0 (it was killed by the signal,
    -15, when the handler was the loop's alone, and would never stop if the stop were dropped)."""
    log = _stop_a_worker(tmp_path, {}, lambda worker, log: _catches(worker.pid, signal.SIGTERM))
    assert "stopped: 0 item(s) graded" in log.read_text()


def _stop_a_worker(tmp_path, more_env: dict[str, str], ready) -> Path:
    """Start a worker on an empty SQLite queue, SIGTERM it once `ready(worker, log)`, and check it
    exits 0; its log."""
    with ModelServer(latency=0.01) as model:
        env = {**_env(tmp_path, f"sqlite:///{tmp_path / 'db.sqlite'}", model.base_url, 20.0), **more_env}
        log = tmp_path / "worker.log"
        worker = _worker(env, log)
        try:
            deadline = time.monotonic() + 120
            while not ready(worker, log) and time.monotonic() < deadline:
                time.sleep(0.01)
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=120) == 0, log.read_text()[-2000:]
        finally:
            if worker.poll() is None:
                worker.kill()
    return log


RECORD_HANDLERS = """
import os, signal
_set = signal.signal
def recording(sig, handler):
    if sig in (signal.SIGINT, signal.SIGTERM):
        name = {signal.SIG_DFL: "default", signal.SIG_IGN: "ignore",
                signal.default_int_handler: "default"}.get(handler, "own")
        with open(os.environ["SIGNAL_LOG"], "a") as f:
            f.write(f"{signal.Signals(sig).name} {name}\\n")
    return _set(sig, handler)
signal.signal = recording
"""


def test_a_worker_never_hands_its_signals_back_to_the_defaults_while_it_lives(tmp_path):
    """From the moment the worker takes SIGTERM and SIGINT until it exits, their handler is never
    the default, not for a moment: a stop arriving then would kill the worker (-15) instead of
    stopping it. Every handler the process is given is recorded (a sitecustomize wrapping
    signal.signal) through a whole run: set-up, the loop, a SIGTERM, the shutdown."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(RECORD_HANDLERS)
    given = tmp_path / "signals.txt"
    _stop_a_worker(tmp_path, {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
                              "SIGNAL_LOG": str(given)}, lambda worker, log: "grading from" in log.read_text())
    lines = given.read_text().splitlines()
    for sig in ("SIGTERM", "SIGINT"):
        mine = [line.split()[1] for line in lines if line.startswith(sig + " ")]
        assert "own" in mine, lines
        assert "default" not in mine[mine.index("own"):], lines
