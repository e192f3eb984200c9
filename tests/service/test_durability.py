"""A real uvicorn server on loopback, killed mid-job and restarted: nothing finished is lost or repeated."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from tests.service.test_jobs import items


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, key: str, data: bytes | None = None, accept: str = "application/json", method: str | None = None):
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json", "Accept": accept})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


class Server:
    def __init__(self, env: dict[str, str]):
        self.port = _port()
        self.proc = subprocess.Popen([sys.executable, "-m", "framejudge.cli", "serve", "--port", str(self.port)],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                urllib.request.urlopen(self.base + "/healthz", timeout=1)
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise AssertionError(self.proc.stderr.read().decode()[-2000:]) from None
                time.sleep(0.1)
        raise AssertionError("server did not start")


def test_sigkill_and_sigterm_mid_job(tmp_path, database_url):
    env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": database_url, "FRAMEJUDGE_RATE_LIMIT": "100000", "FRAMEJUDGE_LEASE_SECONDS": "3",
           "FRAMEJUDGE_UPLOAD_DIR": str(tmp_path / "uploads")}
    key = subprocess.run([sys.executable, "-m", "framejudge.cli", "keys", "create", "--scope", "grade"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    total = 3000
    server = Server(env)
    job = json.loads(_request(server.base + "/v1/jobs", key, json.dumps(items(total)).encode()))["id"]

    def done(s: Server) -> int:
        return json.loads(_request(f"{s.base}/v1/jobs/{job}", key))["done"]

    for sig in (signal.SIGKILL, signal.SIGTERM):
        deadline = time.time() + 120
        start = done(server)
        while done(server) < start + 200 and time.time() < deadline:
            time.sleep(0.1)
        before = done(server)
        assert before < total, "the job finished before the server could be stopped"
        server.proc.send_signal(sig)
        server.proc.wait(timeout=60)
        server = Server(env)
        assert done(server) >= before  # nothing finished was lost
    deadline = time.time() + 600
    while done(server) < total and time.time() < deadline:
        time.sleep(0.2)
    lines = _request(f"{server.base}/v1/jobs/{job}/verdicts", key, accept="application/x-ndjson").decode().splitlines()
    server.proc.terminate()
    server.proc.wait(timeout=60)
    ids = [json.loads(line)["item_id"] for line in lines]
    assert len(ids) == total and len(set(ids)) == total


def _verdicts_counted(server: Server, key: str) -> float:
    text = _request(f"{server.base}/metrics", key, accept="text/plain").decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("framejudge_verdicts_total"))


def test_two_servers_share_one_job(tmp_path, database_url):
    """Two server processes on one database (what a deployment that outgrows one machine runs):
    both take items from the same job, and each item is graded exactly once."""
    env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": database_url, "FRAMEJUDGE_RATE_LIMIT": "100000", "FRAMEJUDGE_LEASE_SECONDS": "3",
           "FRAMEJUDGE_UPLOAD_DIR": str(tmp_path / "uploads")}

    def key(scope: str) -> str:
        return subprocess.run([sys.executable, "-m", "framejudge.cli", "keys", "create", "--scope", scope],
                              env=env, capture_output=True, text=True, check=True).stdout.strip()

    grader, scraper = key("grade"), key("metrics")
    first, second = Server(env), Server(env)
    try:
        total = 1500
        job = json.loads(_request(first.base + "/v1/jobs", grader, json.dumps(items(total)).encode()))["id"]
        deadline = time.time() + 300
        while json.loads(_request(f"{second.base}/v1/jobs/{job}", grader))["done"] < total and time.time() < deadline:
            time.sleep(0.2)
        lines = _request(f"{second.base}/v1/jobs/{job}/verdicts", grader,
                         accept="application/x-ndjson").decode().splitlines()
        counted = [_verdicts_counted(s, scraper) for s in (first, second)]
    finally:
        for s in (first, second):
            s.proc.terminate()
            s.proc.wait(timeout=60)
    ids = [json.loads(line)["item_id"] for line in lines]
    assert len(ids) == total and len(set(ids)) == total
    assert all(c > 0 for c in counted) and sum(counted) == total, counted
