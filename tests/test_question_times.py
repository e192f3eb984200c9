"""A question's time is a moment of its video: finite, not negative, and not after the video's end.
Refused before grading at each door (an items file in the CLI, the Python API, POST /v1/grade),
naming the item and the video's duration, for single- and multi-turn items; where the duration is
only read while grading (a job, a video in object storage), such a turn is a bad_input judge error,
never a verdict. Against real videos, the real app and a loopback model server."""

from __future__ import annotations

import asyncio
import json

import pytest

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from framejudge import grade
from framejudge.cli import app
from framejudge.errors import FramejudgeError
from framejudge.schema import Item, JudgeError
from tests.service.test_job_videos import media  # noqa: F401 - the fixture: a media root holding a 2 s clip.mp4
from tests.service.test_jobs import auth, wait_done
from tests.service.test_media import make

TURN = {"question": "What number is on screen?", "golden": "10", "response_a": "It shows 10."}
LATE = {"single": {"id": "late", "video": "clip.mp4", "turns": [{**TURN, "time": 1e308}]},
        "multi": {"id": "late", "video": "clip.mp4", "task_type": "multi_turn",
                  "turns": [{**TURN, "time": 1.0}, {**TURN, "time": 60.0}]}}
SAID = {"single": "item 'late' turn 0: question time 1e+308 s is after the end of its video (2.000 s)",
        "multi": "item 'late' turn 1: question time 60 s is after the end of its video (2.000 s)"}


def test_an_infinite_time_is_refused_by_the_schema_every_door_reads_items_with():
    with pytest.raises(ValueError, match="time"):
        Item.model_validate({"id": "a", "turns": [{**TURN, "time": float("inf")}]})
    with pytest.raises(FramejudgeError, match="time"):
        grade([{"id": "a", "turns": [{**TURN, "time": float("inf")}]}])


@pytest.mark.parametrize("shape", list(LATE))
def test_the_cli_refuses_a_question_after_the_video_naming_the_item_and_duration(tmp_path, media, shape):
    items = media / "items.jsonl"
    items.write_text(json.dumps(LATE[shape]) + "\n")
    out = tmp_path / "v.jsonl"
    done = CliRunner().invoke(app, ["grade", str(items), "--out", str(out)])
    assert done.exit_code == 2, done.output
    assert f"error: {SAID[shape]}" in done.output
    assert not out.exists()  # nothing graded


def test_the_duration_is_read_in_a_capped_decoding_process_not_in_the_caller(tmp_path, media, monkeypatch):
    """A video's file is untrusted however little of it is read: the demux scan behind the check runs in a
    decoding process (time limit, memory cap), never in the process that grades or serves."""
    import framejudge.frame_sampler
    from framejudge.frame_sampler import sampler
    from framejudge.service.routes import grading

    def in_the_caller(*args, **kwargs):
        raise AssertionError("a video was scanned in the calling process")

    # every name it is reached by in this process; the decoding processes (spawned) import their own
    for module in (sampler, framejudge.frame_sampler, grading):
        monkeypatch.setattr(module, "video_duration", in_the_caller, raising=False)
    items = media / "items.jsonl"
    items.write_text(json.dumps(LATE["multi"]) + "\n")
    done = CliRunner().invoke(app, ["grade", str(items), "--out", str(tmp_path / "v.jsonl")])
    assert done.exit_code == 2 and f"error: {SAID['multi']}" in done.output, done.output
    app_, _, key, _ = make(tmp_path, run_worker=False, media_root=media)
    with TestClient(app_) as client:
        r = client.post("/v1/grade", headers=auth(key), json={"item": LATE["single"]})
    assert r.status_code == 422 and r.json()["code"] == "question_after_video", r.text


@pytest.mark.parametrize("shape", list(LATE))
def test_the_python_api_refuses_a_question_after_the_video(media, shape):
    with pytest.raises(FramejudgeError) as caught:
        grade([LATE[shape]], media_root=media)
    assert str(caught.value) == SAID[shape] and caught.value.code == "invalid_items"


@pytest.mark.parametrize("shape", list(LATE))
def test_post_grade_refuses_a_question_after_the_video_with_a_422(tmp_path, media, shape):
    app_, _, key, _ = make(tmp_path, run_worker=False, media_root=media)
    with TestClient(app_) as client:
        r = client.post("/v1/grade", headers=auth(key), json={"item": LATE[shape]})
        assert r.status_code == 422, r.text
        assert r.json()["detail"] == f"{SAID[shape]} (clip.mp4)" and r.json()["code"] == "question_after_video"
        within = {**LATE[shape], "task_type": "single_turn", "turns": [{**TURN, "time": 2.5}]}
        ok = client.post("/v1/grade", headers=auth(key), json={"item": within})  # up to 1 s past the last frame
        assert ok.status_code == 200, ok.text


def test_a_job_records_a_question_after_the_video_as_a_bad_input_error(tmp_path, media):
    """A job's videos are read as its items are graded: the turn is a judge error, counted in its status."""
    from tests.judge.providers import VLLMServer

    with VLLMServer(json.dumps({"response_a": {"category": "Successful", "rationale": "ok"}})) as server:
        judges = tmp_path / "judges.yaml"
        judges.write_text(f"judges:\n  - spec: litellm:hosted_vllm/m\n    api_base: {server.api_base}\n")
        app_, _, key, _ = make(tmp_path, media_root=media, judges_file=judges)
        with TestClient(app_) as client:
            job = client.post("/v1/jobs?judge=litellm:hosted_vllm/m", headers=auth(key),
                              json={"items": [LATE["single"]], "options": {"cache": False}}).json()["id"]
            status = wait_done(client, job, key)
            [record] = [json.loads(x) for x in client.get(
                f"/v1/jobs/{job}/verdicts", headers={**auth(key), "Accept": "application/x-ndjson"}).text.splitlines()]
        assert server.calls == []  # no model was asked
    assert status["judge_errors"] == 1
    assert record["record"] == "judge_error" and record["kind"] == "bad_input"
    assert "question time 1e+308 s is after the end of its video (2.000 s)" in record["message"]


def test_the_pipeline_records_a_question_after_the_video_as_bad_input(media):
    from framejudge.judge import GradeOptions, Grader
    from framejudge.judge.litellm_backend import LiteLLMJudge
    from framejudge.rubrics import get_rubric
    from tests.judge.providers import VLLMServer

    with VLLMServer("{}") as server:
        judge = LiteLLMJudge("hosted_vllm/m", api_base=server.api_base, max_retries=1)
        grader = Grader(judge, get_rubric("video-qa"), GradeOptions(cache=False), media_root=media)
        [r] = asyncio.run(grader.grade(Item.model_validate(LATE["single"])))
        assert server.calls == []
    assert isinstance(r, JudgeError) and r.kind.value == "bad_input"
    assert SAID["single"] in r.message


def test_a_leaderboard_refuses_a_question_after_the_video_before_any_battle(tmp_path, media):
    files = []
    for name, answer in (("new", "It shows 10."), ("old", "It shows 9.")):
        path = media / f"{name}.jsonl"
        path.write_text(json.dumps({**LATE["single"], "turns": [{**TURN, "response_a": answer, "time": 1e308}]}) + "\n")
        files.append(f"{name}={path}")
    battles = tmp_path / "battles.jsonl"
    done = CliRunner().invoke(app, ["leaderboard", "--model", files[0], "--model", files[1], "--battles",
                                    str(battles)])
    assert done.exit_code == 2, done.output
    assert "question time 1e+308 s is after the end of its video (2.000 s)" in done.output
    assert not battles.exists() or battles.read_text() == ""
