"""A run says how far it is while it runs, and Ctrl-C ends it within moments at any stage keeping what
was graded: `grade` with its standard error going to a file (plain progress lines, as in a CI log)
against a loopback model server that holds some answers back, and a judge whose model is still
loading in a thread; the Python API's progress through `logging` and its `progress=` callback."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import framejudge
from framejudge import FramejudgeError, grade
from framejudge.judge import read_records
from tests.judge.providers import OpenAIServer

ROOT = Path(__file__).parents[1]

GOOD = {"response_a": {"category": "Successful", "rationale": "matches the golden response"},
        "response_b": {"category": "Missing", "rationale": "declines a supported question"},
        "preference": "A", "deciding_criterion": "category"}


def _items(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "turns": [{
        "question": f"How many people are on the bench ({i})?", "golden": "Two people.",
        "response_a": "There are two people.", "response_b": "I cannot tell."}]}) + "\n" for i in ids))
    return path


def _wait_for(what: Callable[[], bool], proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    """Until `what` holds (the process still running), within a generous `timeout`."""
    deadline = time.monotonic() + timeout
    while not what():
        assert proc.poll() is None, f"ended ({proc.returncode}) first:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"not seen in {timeout} s:\n{log.read_text()}"
        time.sleep(0.02)


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as stderr:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=env)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _interrupt(proc: subprocess.Popen, log: Path, graded: int) -> None:
    """Ctrl-C, as a terminal sends it: the run ends with 130, saying how many turns it kept, no traceback."""
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130, log.read_text()
    text = log.read_text()
    assert f"stopped: {graded} turn(s) graded by this run are in" in text and "Traceback" not in text


def test_grade_into_a_log_says_how_far_it_is_and_ctrl_c_keeps_what_was_graded(tmp_path):
    """Two answers come back, two are held: while the run waits, its standard error (a file) says
    2 of 4 turns are done with 2 calls in flight; Ctrl-C ends it (130) keeping the two verdicts,
    and the same command grades the other two only."""
    release = threading.Event()

    def reply(seen):
        if "held" in json.dumps(seen.body):
            release.wait(300)
        return json.dumps(GOOD)

    items = _items(tmp_path / "items.jsonl", ["held-1", "fast-1", "held-2", "fast-2"])
    out, log = tmp_path / "v.jsonl", tmp_path / "stderr.txt"
    with OpenAIServer(reply) as server:
        cmd = [sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out), "--judge",
               f"litellm:{server.model('gpt-4o-mini')}", "--api-base", server.api_base, "--yes", "--no-cache",
               "--no-swap"]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "k", "FRAMEJUDGE_PROGRESS_SECONDS": "0.2",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        proc = _start(cmd, env, log)
        try:
            _wait_for(lambda: "progress: grading: 2/4 turn(s) (50%)" in log.read_text(), proc, log)
            line = next(x for x in log.read_text().splitlines() if "progress: grading: 2/4 turn(s)" in x)
            assert re.search(r", 0 error\(s\), 2 item\(s\) in hand, calls 2/\d+, \d+ s elapsed", line), line
            assert proc.poll() is None  # two answers are still held: the run cannot have ended
            _interrupt(proc, log, graded=2)
        finally:
            _stop(proc)
        kept = read_records(out)
        assert sorted(r.item_id for r in kept) == ["fast-1", "fast-2"]
        release.set()
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        assert again.returncode == 0, again.stderr
        assert "progress: done: 2/2 turn(s) (100%)" in again.stderr  # the last line, on a stderr that is a pipe
        calls = [json.dumps(c.body) for c in server.calls]
        assert sum("fast-1" in c for c in calls) == 1 and sum("fast-2" in c for c in calls) == 1  # not graded again
    records = read_records(out)
    assert sorted(r.item_id for r in records) == ["fast-1", "fast-2", "held-1", "held-2"]
    assert records[:2] == kept


LOADING_PLUGIN = '''
import asyncio, contextlib, os

try:
    from framejudge.progress import loading
except ImportError:  # a framejudge that says nothing of a model's load
    loading = lambda what: contextlib.nullcontext()
from framejudge.backends import Backend, Capabilities
from framejudge.judge import JudgeBase, JudgeResult
from framejudge.schema import Judgement


class LoadingJudge(JudgeBase):
    """Grades at once what needs no model; a question that needs one waits for the model to load
    (in a thread: here, until a line arrives on the pipe its spec names)."""

    backend = "loading"
    needs_frames = False
    deterministic = True
    model_id = "loading-1"

    def __init__(self, pipe):
        self.pipe = pipe
        self.model = None

    def _load(self):
        with loading("the loading model"), open(self.pipe) as f:
            return f.readline()

    async def judge(self, request):
        if "needs the model" in request.item.turns[request.turn].question and self.model is None:
            self.model = await asyncio.to_thread(self._load)
        data = {"response_a": {"category": "Successful", "rationale": "r"},
                "response_b": {"category": "Missing", "rationale": "r"}, "preference": "A",
                "deciding_criterion": "category"}
        return JudgeResult(Judgement.model_validate(data))


BACKEND = Backend("loading", "<pipe>", "loading_judge:LoadingJudge", "a judge with a model to load",
                  Capabilities(deterministic=True))
'''


def _loading_run(tmp_path: Path) -> tuple[list[str], dict[str, str], Path, Path, Path]:
    """`grade` with a plugin judge whose model loads in a thread until its pipe answers: the
    command, its environment, the pipe, the verdicts file and the file its stderr goes to."""
    site = tmp_path / "site"
    info = site / "loading_judge-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "loading_judge.py").write_text(LOADING_PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: loading-judge\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[framejudge.judges]\nloading = loading_judge:BACKEND\n")
    pipe = tmp_path / "model.pipe"
    os.mkfifo(pipe)
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": i, "turns": [{
        "question": f"What is shown ({'needs the model' if i == 'slow' else 'plain'})?",
        "response_a": "A bench.", "response_b": "Nothing."}]}) + "\n" for i in ["slow", "a", "b", "c"]))
    out = tmp_path / "v.jsonl"
    cmd = [sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out), "--judge",
           f"loading:{pipe}", "--no-cache"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)]), "FRAMEJUDGE_PROGRESS_SECONDS": "0.2"}
    return cmd, env, pipe, out, tmp_path / "stderr.txt"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="the model's load waits on a named pipe")
def test_ctrl_c_while_the_judge_loads_its_model_ends_the_run_and_keeps_what_was_graded(tmp_path):
    """A Ctrl-C while the judge's model loads (in a thread, which nothing can stop) ends the run
    at once with 130, not once the load is over; what was graded is kept, and the next run grades
    the rest."""
    cmd, env, pipe, out, log = _loading_run(tmp_path)
    proc = _start(cmd, env, log)
    try:
        _wait_for(lambda: out.exists() and len(out.read_text().splitlines()) == 3, proc, log)
        _interrupt(proc, log, graded=3)
    finally:
        _stop(proc)
    assert sorted(r.item_id for r in read_records(out)) == ["a", "b", "c"]
    # the model loads in the next run (its pipe answered), which grades the one turn left
    threading.Thread(target=lambda: pipe.write_text("loaded\n"), daemon=True).start()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr
    assert sorted(r.item_id for r in read_records(out)) == ["a", "b", "c", "slow"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="the model's load waits on a named pipe")
def test_the_progress_lines_say_what_the_judge_is_loading(tmp_path):
    cmd, env, pipe, out, log = _loading_run(tmp_path)
    proc = _start(cmd, env, log)
    try:
        _wait_for(lambda: "progress: loading the judge (the loading model): 3/4 turn(s) (75%), " in log.read_text(),
                  proc, log)
    finally:
        _stop(proc)


ITEMS = [{"id": f"i{k}", "turns": [{"question": "What colour is the car?", "golden": "The car is red.",
                                    "response_a": "The car is red.", "response_b": "It is blue."}]} for k in range(6)]


def test_the_python_api_tells_its_progress_to_a_callback_and_the_log(tmp_path, caplog):
    seen: list = []
    with caplog.at_level(logging.INFO, logger="framejudge"):
        records = grade(ITEMS, out=tmp_path / "v.jsonl", options={"cache": False}, progress=seen.append)
    assert len(records) == 6
    assert seen and all(isinstance(p, framejudge.Progress) and p.total == 6 for p in seen)
    assert [p.done for p in seen] == sorted(p.done for p in seen)  # it only goes forward
    last = seen[-1]
    assert (last.phase.value, last.done, last.errors, last.in_flight) == ("done", 6, 0, 0) and last.rate > 0
    lines = [r for r in caplog.records if r.name == "framejudge.progress"]
    assert lines and lines[-1].levelno == logging.INFO
    assert lines[-1].getMessage().startswith("done: 6/6 turn(s) (100%), ")
    assert lines[-1].progress["done"] == 6  # the figures, as fields of the record (JSON log lines carry them)


def test_a_progress_interval_that_is_no_number_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_PROGRESS_SECONDS", "often")
    with pytest.raises(FramejudgeError, match=r"FRAMEJUDGE_PROGRESS_SECONDS='often': not a number of seconds") as caught:
        grade(ITEMS[:1], options={"cache": False})
    assert caught.value.code == "invalid_options"
    from typer.testing import CliRunner

    from framejudge.cli import app

    (tmp_path / "items.jsonl").write_text(json.dumps(ITEMS[0]) + "\n")
    result = CliRunner().invoke(app, ["grade", str(tmp_path / "items.jsonl"), "--out", str(tmp_path / "v.jsonl")])
    assert result.exit_code == 2 and "error: FRAMEJUDGE_PROGRESS_SECONDS='often': not a number" in result.output
    assert not (tmp_path / "v.jsonl").exists()
