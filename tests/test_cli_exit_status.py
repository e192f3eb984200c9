"""The exit status and the terminal tell the truth: 0 every turn graded, 1 some turns could not be graded
(each kind of error named with its first message), 2 refused before grading, including a judge that
cannot be called (no credentials, a model server that does not answer), which is refused before any
estimate or call, as the service's /readyz refuses it."""

from __future__ import annotations

import json
import socket

import pytest
from typer.testing import CliRunner

from framejudge import FramejudgeError, grade
from framejudge.cli import app

SIGN = {"question": "What does the sign say?", "golden": "STOP", "response_a": "STOP."}


def run(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def _items(tmp_path, *rows) -> str:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_every_turn_graded_exits_0(tmp_path):
    done = run("grade", _items(tmp_path, {"id": "a", "turns": [SIGN]}), "--out", tmp_path / "v.jsonl")
    assert done.exit_code == 0, done.output
    assert "could not be graded" not in done.output


def test_turns_that_could_not_be_graded_exit_1_with_each_kind_and_its_first_message(tmp_path):
    items = _items(tmp_path, {"id": "a", "video": "nowhere1.mp4", "turns": [SIGN]},
                   {"id": "b", "video": "nowhere2.mp4", "turns": [SIGN]}, {"id": "c", "turns": [SIGN]})
    out = tmp_path / "v.jsonl"
    done = run("grade", items, "--out", out)
    assert done.exit_code == 1, done.output
    assert "error: 2 turn(s) could not be graded" in done.output
    assert "bad_input: 2 turn(s), the first: item a turn 0:" in done.output and "nowhere1.mp4" in done.output
    summary = json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])
    assert summary["errors"] == {"bad_input": 2} and summary["turns_graded"] == 1
    assert summary["error_examples"]["bad_input"].startswith("item a turn 0: ")
    assert len(out.read_text().splitlines()) == 3  # what was graded is kept, the errors recorded


def test_a_hosted_judge_without_its_key_is_refused_before_any_estimate(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "v.jsonl"
    done = run("grade", _items(tmp_path, {"id": "a", "turns": [SIGN]}), "--out", out,
               "--judge", "litellm:openai/gpt-4o-mini", "--yes")
    assert done.exit_code == 2
    assert "error: the judge litellm:openai/gpt-4o-mini cannot be called: missing OPENAI_API_KEY" in done.output
    assert "judge call(s)" not in done.output and not out.exists()  # no estimate, nothing graded or recorded
    with pytest.raises(FramejudgeError, match="cannot be called: missing OPENAI_API_KEY") as caught:
        grade([{"id": "a", "turns": [SIGN]}], judge="litellm:openai/gpt-4o-mini")
    assert caught.value.code == "judge_unavailable"


def test_a_model_server_that_does_not_answer_is_refused_before_any_call(tmp_path):
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "v.jsonl"
    done = run("grade", _items(tmp_path, {"id": "a", "turns": [SIGN]}), "--out", out, "--judge",
               "litellm:hosted_vllm/m", "--api-base", f"http://127.0.0.1:{port}/v1", "--yes")
    assert done.exit_code == 2, done.output
    assert f"cannot be called: http://127.0.0.1:{port}/v1 does not answer" in done.output and not out.exists()
