"""Operators' logs: one line per notable event (an endpoint's concurrency or pace cut, a Retry-After
pause, a job taken up and finished), as text or JSON lines, from `framejudge worker` and `serve`."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from framejudge.endpoint import Endpoint
from framejudge.logs import configure

ROOT = Path(__file__).parents[2]


def _events(caplog) -> list[dict]:
    return [{"event": getattr(r, "event", None), **{k: getattr(r, k) for k in ("endpoint", "limit", "pace", "seconds")
                                                    if hasattr(r, k)}} for r in caplog.records]


def test_an_endpoint_logs_its_cuts_and_pauses_once_each(caplog):
    async def overloaded(gate: Endpoint, **how) -> None:
        async with gate.slot() as slot:
            await asyncio.sleep(0.01)  # all three in flight together: one burst
            slot.overloaded(**how)

    async def run() -> None:
        # a burst of three: one cut (the cool-down holds the others), one pause (the others extend it)
        gate = Endpoint("http://model:8000/v1", initial=8, maximum=8)
        await asyncio.gather(*(overloaded(gate, retry_after=30.0) for _ in range(3)))
        paced = Endpoint("http://other:8000/v1", initial=8, maximum=8)
        await asyncio.gather(*(overloaded(paced, rate_limited=True) for _ in range(3)))

    with caplog.at_level(logging.WARNING, logger="framejudge"):
        asyncio.run(run())
    events = _events(caplog)
    assert [e["event"] for e in events] == ["concurrency_cut", "paused", "pace_cut"]
    assert events[0] == {"event": "concurrency_cut", "endpoint": "http://model:8000/v1", "limit": 4}
    assert events[1] == {"event": "paused", "endpoint": "http://model:8000/v1", "seconds": 30.0}
    assert events[2]["endpoint"] == "http://other:8000/v1" and events[2]["pace"] > 0
    assert "concurrency cut to 4" in caplog.records[0].getMessage()
    assert "asked to wait 30 s (Retry-After)" in caplog.records[1].getMessage()


def test_json_lines_carry_the_figures(capsys):
    configure("info", json_lines=True)
    try:
        logging.getLogger("framejudge.endpoint").warning("endpoint %s: cut", "e", extra={"endpoint": "e", "limit": 3})
        logging.getLogger("framejudge.worker").debug("not shown at info")
    finally:
        logging.getLogger("framejudge").handlers.clear()
        logging.getLogger("framejudge").setLevel(logging.NOTSET)
    [line] = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["level"] == "WARNING" and record["logger"] == "framejudge.endpoint"
    assert record["message"] == "endpoint e: cut" and record["endpoint"] == "e" and record["limit"] == 3


def test_a_worker_logs_the_jobs_it_takes_up_and_finishes(tmp_path):
    from framejudge.schema import GradeOptions, Item
    from framejudge.service.jobs import create_job
    from framejudge.service.store import engine_for

    url = f"sqlite:///{tmp_path / 'service.db'}"
    engine = engine_for(url)
    items = [Item(id=f"i{k}", turns=[{"question": "How many?", "golden": "Two.", "response_a": "Two."}])
             for k in range(3)]
    job, _ = create_job(engine, "k", items, "reference", "video-qa", GradeOptions(cache=False), None)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FRAMEJUDGE_SERVICE_DB": url,
           "FRAMEJUDGE_UPLOAD_DIR": str(tmp_path / "uploads"), "FRAMEJUDGE_LOG_LEVEL": "info"}
    proc = subprocess.Popen([sys.executable, "-m", "framejudge.cli", "worker", "--log-json"], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline, lines = time.time() + 120, []
        while time.time() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            if '"job_finished"' in line:
                break
        proc.send_signal(signal.SIGTERM)
        lines += proc.communicate(timeout=60)[1].splitlines()
    finally:
        if proc.poll() is None:
            proc.kill()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    taken = [e for e in events if e.get("event") == "job_taken"]
    done = [e for e in events if e.get("event") == "job_finished"]
    assert [e["job"] for e in taken] == [job] and taken[0]["judge"] == "reference"
    assert [e["job"] for e in done] == [job], lines


def test_an_unknown_level_is_refused(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp_path / 's.db'}"}
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "worker", "--log-level", "loud"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "loud" in proc.stderr
    with pytest.raises(ValueError, match="use one of debug, info, warning, error"):
        configure("loud")
