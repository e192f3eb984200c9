"""`framejudge.grade()` decodes in the same killable, memory-capped processes as `framejudge grade`: a
video whose decoding goes over the memory cap is the turn's bad_input judge error there too, the
caller going on; from a thread other than the main one as well; and Ctrl-C still stops the call,
leaving no decoding process behind."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from framejudge import grade
from framejudge.cli import app
from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.judge import read_records
from tests.judge.providers import OpenAIServer

GOOD = {"response_a": {"category": "Successful", "rationale": "matches the golden response"},
        "response_b": {"category": "Missing", "rationale": "declines a supported question"},
        "preference": "A", "deciding_criterion": "category"}
TURN = {"question": "What is shown on screen?", "golden": "A countdown.", "response_a": "A countdown.",
        "response_b": "I cannot tell."}


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> Path:
    """A small clip, and an 8K one whose decoding holds far more than 256 MB (which decodes where memory allows)."""
    folder = tmp_path_factory.mktemp("videos")
    write_video(folder / "small.mp4", countdown, cfr_times(1, 10), size=(640, 360), gop=10)
    write_video(folder / "huge.mp4", countdown, cfr_times(1, 10), size=(7680, 4320), gop=250)
    (folder / "items.jsonl").write_text("".join(json.dumps({"id": name, "video": f"{name}.mp4", "turns": [TURN]}) + "\n"
                                                for name in ("huge", "small")))
    return folder


@pytest.fixture()
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with OpenAIServer(lambda seen: json.dumps(GOOD)) as server:
        yield server


def _grade(videos: Path, server: OpenAIServer, **kw):
    return grade(videos / "items.jsonl", judge=f"litellm:{server.model('gpt-4o-mini')}", api_base=server.api_base,
                 options={"swap": False, "cache": False}, **kw)


def _over_the_cap(record) -> None:
    assert record.record == "judge_error" and record.kind == "bad_input", record
    assert record.item_id == "huge" and "over the memory cap of 256 MB" in record.message, record.message


def test_a_video_over_the_memory_cap_is_a_bad_input_record_through_grade_as_through_the_cli(videos, server, tmp_path):
    graded = _grade(videos, server, decoding={"memory_mb": 256, "workers": 1})
    _over_the_cap(graded[0])
    assert graded[1].record == "verdict" and graded[1].item_id == "small"  # a fresh decoding process took over
    assert graded.summary.errors == {"bad_input": 1}
    # the CLI, with the same limits, writes the same records
    out = tmp_path / "v.jsonl"
    result = CliRunner().invoke(app, ["grade", str(videos / "items.jsonl"), "--out", str(out), "--judge",
                                      f"litellm:{server.model('gpt-4o-mini')}", "--api-base", server.api_base,
                                      "--no-swap", "--no-cache", "--yes", "--decode-memory-mb", "256",
                                      "--decode-workers", "1"])
    assert result.exit_code == 1, result.output
    by_cli = read_records(out)
    assert [(r.item_id, r.record, getattr(r, "kind", None), getattr(r, "message", None)) for r in by_cli] == \
        [(r.item_id, r.record, getattr(r, "kind", None), getattr(r, "message", None)) for r in graded]


def test_grade_from_a_thread_decodes_in_the_capped_processes_too(videos, server):
    got: list = []
    worker = threading.Thread(target=lambda: got.append(_grade(videos, server, decoding={"memory_mb": 256})))
    worker.start()
    worker.join(timeout=300)
    assert not worker.is_alive() and len(got) == 1
    _over_the_cap(got[0][0])
    assert got[0][1].record == "verdict"


def _decoders() -> set[int]:
    """This process's decoding processes (spawned, running)."""
    return {p.pid for p in psutil.Process().children(recursive=True)
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE and "spawn_main" in " ".join(p.cmdline())}


def test_ctrl_c_while_a_video_decodes_stops_grade_and_its_decoding_processes(videos, server, tmp_path):
    before = _decoders()
    seen: list[int] = []

    def on_progress(now) -> None:
        if now.decoding and not seen:  # a turn waits for its frames: Ctrl-C, as a terminal sends it
            seen.append(now.decoding)
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        _grade(videos, server, out=tmp_path / "v.jsonl", decoding={"workers": 1}, progress=on_progress)
    assert seen, "no turn was decoding"
    assert not _decoders() - before  # the decoding processes were stopped with the call
    # and the same call, again, grades what the stopped one did not
    graded = _grade(videos, server, out=tmp_path / "v.jsonl", decoding={"workers": 1})
    assert [(r.item_id, r.record) for r in graded] == [("huge", "verdict"), ("small", "verdict")]
