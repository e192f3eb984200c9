"""A key does what it names while it lives: revoking a key (`framejudge keys revoke`) stops its
unfinished jobs at once, whichever worker holds their items (the server's own and a `framejudge
worker` process, on SQLite and PostgreSQL); an expired key is refused and its jobs stop as a
revoked key's do. Real processes and a loopback model server at a slow pace counting its calls."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from bench.model_server import ModelServer
from framejudge.cli import app as cli
from framejudge.db import engine_for
from framejudge.runner import queue
from framejudge.runner.keys import ApiKey
from framejudge.schema import GradeOptions, Item
from framejudge.service.app import create_app
from framejudge.service.jobs import create_job, job_status
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, revoke_key
from tests.service.test_durability import Server, _request
from tests.service.test_workers import JUDGE, _env, _worker

pytest.importorskip("litellm")


def _items(prefix: str, n: int) -> list[dict]:
    return [{"id": f"{prefix}{k}", "turns": [{"question": f"[item {prefix}{k}] How many people?", "golden": "2.",
                                              "response_a": "There are 2 people.", "response_b": "Three."}]}
            for k in range(n)]


def _key(env: dict[str, str], *scopes: str) -> str:
    args = [a for scope in scopes for a in ("--scope", scope)]
    return subprocess.run([sys.executable, "-m", "framejudge.cli", "keys", "create", *args], env=env,
                          capture_output=True, text=True, check=True).stdout.strip()


def _status(server: Server, key: str, job: str) -> dict:
    return json.loads(_request(f"{server.base}/v1/jobs/{job}", key))


def _until(condition, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_revoking_a_key_stops_its_job_in_every_worker(tmp_path, database_url):
    """A 120-item job of one key against a model at 0.5 s a call, graded by the server's worker and
    a `framejudge worker`; the key revoked after 8 calls. Every model call the key's items make
    is one made before the revocation or by an item being graded then (in flight, reported by
    `keys revoke`); no record is written after it; the key gets 401 saying it was revoked; another
    key's job, queued afterwards, is graded in full (so the workers were taking items all along)."""
    with ModelServer(latency=0.5) as model:
        env = _env(tmp_path, database_url, model.base_url, 20.0)
        spender, other, admin = _key(env, "grade"), _key(env, "grade"), _key(env, "admin")
        server = Server(env)
        worker = _worker(env, tmp_path / "worker.log")
        try:
            body = json.dumps({"items": _items("a", 120), "options": {"cache": False, "swap": False}}).encode()
            job = json.loads(_request(f"{server.base}/v1/jobs?judge={JUDGE}", spender, body))["id"]
            _until(lambda: model.stats()["completed"] >= 8, "the job made no calls")
            revoked = subprocess.run([sys.executable, "-m", "framejudge.cli", "keys", "revoke",
                                      spender.split("_")[1]], env=env, capture_output=True, text=True, timeout=120)
            stopped = _status(server, admin, job)  # as it stands once the revocation is committed
            said = re.search(r"stopped (\d+) unfinished job\(s\), cancelling (\d+) item\(s\) not started and (\d+) "
                             r"being graded", revoked.stdout)
            in_flight = int(said.group(3)) if said else 0

            body = json.dumps({"items": _items("b", 24), "options": {"cache": False, "swap": False}}).encode()
            later = json.loads(_request(f"{server.base}/v1/jobs?judge={JUDGE}", other, body))["id"]
            _until(lambda: _status(server, other, later)["state"] == "done", "the other key's job did not finish")
            final = _status(server, admin, job)
            with pytest.raises(urllib.error.HTTPError) as refused:
                _request(f"{server.base}/v1/jobs/{job}", spender)
        finally:
            server.proc.terminate()
            server.proc.wait(timeout=60)
            worker.terminate()
            worker.wait(timeout=60)
        calls = model.stats()
    by_tag = calls["by_tag"]
    assert sum(n for tag, n in by_tag.items() if tag.startswith("b")) == 24
    spent = calls["requests"] - 24  # every call the revoked key's items started, answered or not
    assert spent <= stopped["done"] + in_flight, (spent, stopped, in_flight)  # nothing new after the revocation
    assert revoked.returncode == 0 and said is not None, revoked.stdout + revoked.stderr
    assert said.group(1) == "1" and int(said.group(2)) + in_flight + stopped["done"] == 120, revoked.stdout
    assert stopped["state"] == "cancelled" and stopped["running"] == stopped["pending"] == 0, stopped
    assert final["done"] == stopped["done"] and final["state"] == "cancelled", final  # no record after it
    assert refused.value.code == 401
    assert "has been revoked" in json.loads(refused.value.read())["detail"]


def _job(engine, key_id: str, n: int) -> str:
    items = [Item(id=f"i{k}", turns=[{"question": "Q?", "response_a": "A."}]) for k in range(n)]
    return create_job(engine, key_id, items, "reference", "video-qa", GradeOptions(), None)[0]


def _expire(engine, key: str) -> None:
    """The key's expiry, moved to a minute ago (as if its lifetime had passed)."""
    with Session(engine) as s, s.begin():
        s.execute(update(ApiKey).where(ApiKey.id == key.split("_")[1])
                  .values(expires_at=datetime.now(timezone.utc) - timedelta(minutes=1)))


def test_the_queue_leases_no_item_of_a_revoked_or_expired_key(database_url):
    engine = engine_for(database_url)
    live, leaving, expiring = (create_key(engine, ["grade"], expires_in=timedelta(days=1)) for _ in range(3))
    jobs = {key: _job(engine, key.split("_")[1], 5) for key in (live, leaving, expiring)}
    held = queue.claim(engine, "w", 2, lease_s=60) + queue.claim(engine, "w", 2, lease_s=60)
    mine = [c for c in held if c.key_id == leaving.split("_")[1]]
    assert mine  # one of the claims took the leaving key's items

    gone = revoke_key(engine, leaving.split("_")[1])  # between two claims
    assert gone is not None and (gone.stopped.jobs, gone.stopped.pending, gone.stopped.running) == (1, 5 - len(mine),
                                                                                                  len(mine))
    assert queue.held(engine, "w") == {(c.job_id, c.position) for c in held if c not in mine}
    assert len(queue.finish(engine, "w", [queue.Finished(c.job_id, c.position, []) for c in mine])) == len(mine)

    _expire(engine, expiring)
    taken = [c for _ in range(10) for c in queue.claim(engine, "w", 2, lease_s=60)]
    assert {c.job_id for c in taken} == {jobs[live]}  # still allowed: the live key's items, all of them
    queue.reclaim_expired(engine)  # the workers' housekeeping stops an expired key's jobs
    for key, state in ((leaving, "cancelled"), (expiring, "cancelled"), (live, "running")):
        status = job_status(engine, jobs[key])
        assert status is not None and status.state == state, (key, status)
    assert job_status(engine, jobs[leaving]).done == 0  # nothing written for the items being graded


def test_expired_and_revoked_keys_are_refused_with_the_reason(tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                        run_worker=False)
    engine = engine_for(settings.database_url)
    admin, grader, old, revoked = (create_key(engine, scopes, expires_in=life) for scopes, life in (
        (["admin"], None), (["grade"], timedelta(days=90)), (["grade"], timedelta(hours=1)), (["grade"], None)))
    _expire(engine, old)
    revoke_key(engine, revoked.split("_")[1])
    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/rubrics", headers={"Authorization": f"Bearer {grader}"}).status_code == 200
        for key, why in ((old, "expired at"), (revoked, "has been revoked")):
            r = client.get("/v1/rubrics", headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 401 and why in r.json()["detail"], r.text
        wrong = f"fj_{old.split('_')[1]}_not-its-secret"  # only the key's holder learns why
        assert client.get("/v1/rubrics", headers={"Authorization": f"Bearer {wrong}"}).json()["detail"] == \
            "unknown API key"
        assert client.get("/v1/keys", headers={"Authorization": f"Bearer {grader}"}).status_code == 403
        listed = {k["id"]: k for k in client.get("/v1/keys", headers={"Authorization": f"Bearer {admin}"}).json()}
    states = {key: (listed[key.split("_")[1]]["state"], listed[key.split("_")[1]]["expires_at"])
              for key in (admin, grader, old, revoked)}
    assert states[admin] == ("active", None) and states[revoked] == ("revoked", None)
    assert states[old][0] == "expired" and states[grader][0] == "active"
    ends = datetime.fromisoformat(states[grader][1])
    assert timedelta(days=89) < ends - datetime.now(timezone.utc) <= timedelta(days=90)


def test_keys_create_expires_in_and_keys_list_show_the_expiry(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_SERVICE_DB", f"sqlite:///{tmp_path / 'db.sqlite'}")
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()
    made = runner.invoke(cli, ["keys", "create", "--scope", "review", "--expires-in", "12h"])
    assert made.exit_code == 0, made.output
    forever = runner.invoke(cli, ["keys", "create"])
    listed = runner.invoke(cli, ["keys", "list"]).output
    ends = (datetime.now(timezone.utc) + timedelta(hours=12)).strftime("%Y-%m-%d")
    row = next(line for line in listed.splitlines() if made.output.split("_")[1] in line)
    assert "expires" in listed and ends in row and "active" in row
    assert "never" in next(line for line in listed.splitlines() if forever.output.split("_")[1] in line)
    for bad in ("soon", "12", "0d", "3x", "1d 2"):
        refused = runner.invoke(cli, ["keys", "create", "--expires-in", bad])
        assert refused.exit_code == 2 and "--expires-in" in refused.output and "Traceback" not in refused.output, \
            (bad, refused.output)
