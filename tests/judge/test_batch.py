"""Batches: appended as they finish, resumable after a kill, errors kept apart; the grade command."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from framejudge.judge import Grader, ItemsError, ReferenceJudge, load_items, read_records
from framejudge.runner import run_batch
from framejudge.judge.batch import summarize, wilson
from framejudge.rubrics import get_rubric
from framejudge.schema import JudgeError, Verdict

RUBRIC = get_rubric("video-qa")
EXAMPLES = Path(__file__).parents[2] / "examples" / "items.jsonl"


def make_items(path: Path, n: int) -> Path:
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"item-{i}", "turns": [{
                "question": "How many people are on the bench?", "golden": f"{i % 5} people.",
                "response_a": f"There are {i % 5} people.", "response_b": f"There are {(i + 1) % 5} people.",
            }]}) + "\n")
    return path


def test_batch_writes_every_turn_once_and_resumes(tmp_path):
    items = load_items(make_items(tmp_path / "items.jsonl", 50))
    out = tmp_path / "v.jsonl"
    summary = asyncio.run(run_batch(Grader(ReferenceJudge(), RUBRIC), items, out))
    assert summary.turns_graded == 50 and summary.errors == {}
    first = out.read_text()
    again = asyncio.run(run_batch(Grader(ReferenceJudge(), RUBRIC), items, out))
    assert out.read_text() == first  # nothing redone
    assert again.turns_graded == 50


def test_a_batch_without_a_file_hands_every_record_to_its_caller_and_writes_nothing(tmp_path):
    """The Ray engine's grading actors grade this way: the driver alone writes the output."""
    from framejudge.runner.resume import ResumePlan

    items = load_items(make_items(tmp_path / "items.jsonl", 12))
    out = tmp_path / "v.jsonl"
    asyncio.run(run_batch(Grader(ReferenceJudge(), RUBRIC), items, out))
    handed: list = []
    before = sorted(os.listdir(tmp_path))
    summary = asyncio.run(run_batch(Grader(ReferenceJudge(), RUBRIC), items, None,
                                    plan=ResumePlan(work=[(it, set()) for it in items[:8]]),
                                    on_done=lambda item, records: handed.extend(records)))
    assert sorted(os.listdir(tmp_path)) == before
    def by_item(records):
        return {r.item_id: r.model_dump(exclude={"provenance"}) for r in records}
    wanted = {it.id for it in items[:8]}
    assert by_item(handed) == by_item(r for r in read_records(out) if r.item_id in wanted) and len(handed) == 8
    assert summary.turns_graded == 8
    with pytest.raises(ValueError, match="needs the plan"):
        asyncio.run(run_batch(Grader(ReferenceJudge(), RUBRIC), items, None))


def test_torn_last_line_is_dropped_and_regraded(tmp_path):
    items = load_items(make_items(tmp_path / "items.jsonl", 5))
    out = tmp_path / "v.jsonl"
    asyncio.run(run_batch(Grader(ReferenceJudge(), RUBRIC), items, out))
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
    assert len(read_records(out)) == 3
    asyncio.run(run_batch(Grader(ReferenceJudge(), RUBRIC), items, out))
    ids = [r.item_id for r in read_records(out)]
    assert sorted(ids) == sorted(f"item-{i}" for i in range(5))


def test_a_damaged_middle_line_is_an_error_not_silence(tmp_path):
    out = tmp_path / "v.jsonl"
    out.write_text('{"record": "verdict"}\n{"also": "bad"}\n')
    with pytest.raises(ItemsError, match="v.jsonl:1: not a verdict"):
        read_records(out)


def test_sigkill_mid_batch_then_rerun_loses_and_repeats_nothing(tmp_path):
    items_path = make_items(tmp_path / "items.jsonl", 20000)
    out = tmp_path / "v.jsonl"
    cmd = [sys.executable, "-m", "framejudge.cli", "grade", str(items_path), "--out", str(out), "--concurrency", "8"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or out.stat().st_size < 200_000):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = read_records(out)
    assert 0 < len(partial) < 20000, "the batch should have been killed mid-run"
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    records = read_records(out)
    ids = [r.item_id for r in records]
    assert len(ids) == len(set(ids)) == 20000
    assert all(isinstance(r, Verdict) for r in records)
    # What was finished before the kill is still there, unchanged.
    after = {r.item_id: r for r in records}
    assert all(after[r.item_id] == r for r in partial)


def test_ctrl_c_mid_batch_says_what_it_stops_and_a_rerun_finishes(tmp_path):
    items_path = make_items(tmp_path / "items.jsonl", 5000)
    out = tmp_path / "v.jsonl"
    cmd = [sys.executable, "-m", "framejudge.cli", "grade", str(items_path), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or out.stat().st_size < 50_000):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted: stopping the" in stderr and "stopped:" in stderr and "Traceback" not in stderr
    partial = read_records(out)
    assert 0 < len(partial) < 5000, "the batch should have been interrupted mid-run"
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    records = read_records(out)
    assert sorted(r.item_id for r in records) == sorted(f"item-{i}" for i in range(5000))
    assert records[: len(partial)] == partial


INTERRUPTIBLE = """
import asyncio, os, signal, sys, time
from framejudge.runner.local import Interrupted, interruptible

# every SIGINT handler the process is given, in order
given = []
_set = signal.signal
def recording(sig, handler):
    if sig == signal.SIGINT:
        given.append(handler)
    return _set(sig, handler)
signal.signal = recording

async def work():
    os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C, while the work runs
    await asyncio.sleep(60)

try:
    asyncio.run(interruptible(work(), lambda: print("stopping", flush=True), lambda: print("again", flush=True)))
except Interrupted:
    pass
# the loop has closed; the process still shuts down (threads, decoders, a cluster): a second
# Ctrl-C now ends it at once with 130, as it did inside the loop
print("handler", signal.getsignal(signal.SIGINT) is not signal.default_int_handler, flush=True)
# never Python's default, not for a moment: a Ctrl-C then would end the process with a traceback
print("defaults", [h for h in given if h in (signal.default_int_handler, signal.SIG_DFL)], flush=True)
os.kill(os.getpid(), signal.SIGINT)
time.sleep(30)
print("not ended", flush=True)
"""


def test_after_an_interrupt_a_second_ctrl_c_ends_the_process_even_once_the_loop_has_closed(tmp_path):
    proc = subprocess.run([sys.executable, "-c", INTERRUPTIBLE], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130, proc.stderr
    assert proc.stdout.split("\n")[:4] == ["stopping", "handler True", "defaults []", "again"], proc.stdout
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr


def test_items_file_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "turns": [{"question": "q", "response_a": "x"}]}\n{"id": "b", "turns": []}\n')
    with pytest.raises(ItemsError, match=r"bad.jsonl:2: turns: List should have at least 1 item"):
        load_items(bad)
    bad.write_text('{"id": "a", "video": "https://x/y.mp4", "turns": [{"question": "q", "response_a": "x"}]}\n')
    with pytest.raises(ItemsError, match=r"bad.jsonl:1: video https://x/y.mp4: https:// URLs are not read"):
        load_items(bad)
    bad.write_text('{"id": "a", "turns": [{"question": "q", "response_a": "x"}]}\n'
                   '{"id": "b", "video": "", "turns": [{"question": "q", "response_a": "x"}]}\n')
    with pytest.raises(ItemsError, match=r"bad.jsonl:2: video: .*video is empty"):
        load_items(bad)
    bad.write_text('{"id": "a", "turns": [{"question": "q", "response_a": "x"}]}\n' * 2)
    with pytest.raises(ItemsError, match="duplicate item id 'a'"):
        load_items(bad)
    with pytest.raises(ItemsError, match="no such items file"):
        load_items(tmp_path / "none.jsonl")


def test_summary_counts_and_interval(tmp_path):
    items = load_items(make_items(tmp_path / "items.jsonl", 10))
    out = tmp_path / "v.jsonl"
    s = asyncio.run(run_batch(Grader(ReferenceJudge(), RUBRIC), items, out))
    assert s.categories_a == {"Successful": 10} and s.categories_b == {"Not Successful": 10}
    assert s.preferences == {"A": 10}
    assert s.win_rate_a.estimate == 1.0 and s.win_rate_a.high == pytest.approx(1.0)
    assert s.win_rate_a.low == pytest.approx(0.7225, abs=1e-4)  # Wilson, 10 of 10
    w = wilson(5, 10)
    assert (round(w.low, 4), round(w.high, 4)) == (0.2366, 0.7634)  # the textbook Wilson interval
    assert summarize([], 0).win_rate_a.estimate is None


def test_grade_command_on_the_bundled_examples(tmp_path):
    items = tmp_path / "items.jsonl"
    shutil.copy(EXAMPLES, items)
    # Without the clips (made by `framejudge examples make`) every turn is a bad_input error.
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out",
                           str(tmp_path / "none.jsonl")], capture_output=True, text=True, timeout=120)
    records = read_records(tmp_path / "none.jsonl")
    assert len(records) == 13 and all(isinstance(r, JudgeError) and r.kind == "bad_input" for r in records)
    assert all("file not found" in r.message for r in records)
    subprocess.run([sys.executable, "-m", "framejudge.cli", "examples", "make", str(tmp_path / "videos")],
                   check=True, capture_output=True, timeout=120)
    out = tmp_path / "v.jsonl"
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out),
                           "--summary-json", str(tmp_path / "s.json")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["items"] == 12 and summary["turns_graded"] == 13 and summary["decided_by_rules"] == 1
    # the price tag, the departures board, the cafe sign (hours, name, calories) read on screen
    assert summary["used_screen_text"] == 5
    assert json.loads((tmp_path / "s.json").read_text()) == summary
    assert "no tokens, no cost" in proc.stderr


@pytest.mark.parametrize("args,message", [
    (["--judge", "oracle"], "unknown judge 'oracle'"),
    (["--rubric", "nope"], "no rubric with id 'nope'"),
    (["-n", "0"], "frame budget must be at least 1"),
    (["--decode-timeout", "0"], "--decode-timeout 0.0: Input should be greater than 0"),
])
def test_grade_command_bad_options(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(EXAMPLES), "--out",
                           str(tmp_path / "v.jsonl"), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_grade_command_bad_model_path(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(EXAMPLES), "--out",
                           str(tmp_path / "v.jsonl"), "--judge", f"transformers:{tmp_path / 'nope'}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "cannot use model" in proc.stderr and "Traceback" not in proc.stderr


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the decoding processes in /proc")
def test_ctrl_c_while_the_decoding_processes_start_prints_no_traceback(tmp_path):
    """A terminal's Ctrl-C reaches the whole process group. The decoding processes spend a second
    or two importing before their initializer could ignore it: born ignoring it, none dies of it
    with a KeyboardInterrupt traceback. The run's threads waiting on them end when the stop
    closes them (a stopped pool resolved nothing it had queued, and the process hung at exit),
    and the command ends as any Ctrl-C does (exit 130)."""
    from framejudge.examples.clips import countdown
    from framejudge.examples.synth import cfr_times, write_video

    clip = write_video(tmp_path / "c.mp4", countdown, cfr_times(4, 30), gop=30)
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"i{k}", "video": str(clip), "turns": [{
        "time": 2.0, "question": "What does the text on the screen say?", "golden": "It says 2.",
        "response_a": "It says 2.", "response_b": "It says 7."}]}) + "\n" for k in range(4)))
    proc = subprocess.Popen([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out",
                             str(tmp_path / "v.jsonl"), "--no-cache", "-n", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not _children(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.2)  # the decoding processes are importing; the run's threads wait on them
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert not [sign for sign in ("Traceback", "KeyboardInterrupt", "Exception in thread") if sign in stderr], stderr
