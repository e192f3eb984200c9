"""One base for the errors a user can cause: every such class is a FramejudgeError with its own
stable code; the command line prints any of them as one `error:` line (exit 2) and the service
answers it as a problem document carrying the code."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import framejudge
from framejudge import FramejudgeError

# The exceptions defined in framejudge that are not FramejudgeErrors, and why: each carries control
# flow inside the library (or is the HTTP answer itself); no user sees one as an error of theirs.
INTERNAL = {
    "framejudge.frame_sampler.isolate._Recycled": "a decoding process that ran out of memory earlier exited "
                                                  "instead of taking the video; the sampler hands it to a new one",
    "framejudge.frame_sampler.isolate.DecodingStopped": "the decoding processes were closed while a call waited on "
                                                        "them (a run being stopped); nothing is wrong with the video",
    "framejudge.endpoint.EndpointBusy": "no room at a model endpoint in time; the judge records it on the "
                                               "turn as a judge error (rate limited or timed out)",
    "framejudge.runner.local.Interrupted": "Ctrl-C during a batch: the CLI says what was kept and exits 130",
    "framejudge.judge.base.JudgeFailure": "a backend's failed judgement; it becomes a judge error record",
    "framejudge.judge.base.JudgeStopped": "a judge told to stop; the turn gets no record and a later run grades it",
    "framejudge.judge.litellm_backend.VideoNotSeen": "a reply to a clip that counts no video tokens; it becomes a "
                                                     "judge error record (backend_error)",
    "framejudge.runner.batch_api.Deferred": "a call whose batch reply is not in yet: the turn waits for a later "
                                            "run of the same command (no record)",
    "framejudge.judge.openai_wire.WireError": "a call to an OpenAI-compatible server that got no reply; the judge "
                                              "retries it or records it on the turn as a judge error",
    "framejudge.judge.openai_wire.WireStatusError": "a WireError: the server's HTTP error status",
    "framejudge.judge.openai_wire.WireTimeout": "a WireError: no reply in the call's time limit",
    "framejudge.judge.openai_wire.WireConnectionError": "a WireError: no connection, or one dropped",
    "framejudge.judge.openai_wire.WireReplyRefused": "a WireError: a reply the call does not read (a redirect, a "
                                                     "body over the cap); the turn's judge error says which",
    "framejudge.judge.model_http.ReplyLimit": "a model reply refused while it was read; the call fails and the turn "
                                              "gets a backend_error record naming why",
    "framejudge.judge.model_http.ReplyTooLarge": "a ReplyLimit: the reply's body passed FRAMEJUDGE_MAX_REPLY_MB",
    "framejudge.judge.model_http.RedirectRefused": "a ReplyLimit: a 3xx answer, which a model call never follows",
    "framejudge.judge.model_http.BadEncoding": "a ReplyLimit: a Content-Encoding the call did not ask for",
    "framejudge.service.review.store.UnitMoved": "another decision reached the unit after it was read; the route "
                                                 "answers 409 stale_decision and shows the unit again",
    "framejudge.judge.reask.InvalidReply": "a model's reply that is no judgement: asked again, then a judge error",
    "framejudge.judge.meaning.NeedVectors": "asks the caller to embed some texts, then to compute again",
    "framejudge.judge.metamorphic.Skip": "a case a generator cannot transform; counted among the skipped",
    "framejudge.service.problems.ProblemError": "the HTTP answer itself (status, title, detail), raised by routes; "
                                                "a FramejudgeError reaching the app becomes one",
    "framejudge.service.limits.BodyTimedOut": "a ProblemError (408 for a request body that stopped arriving)",
    "framejudge.service.review.sessions.SignInNeeded": "sends a browser to the review pages' sign-in page",
    "framejudge.service.review.sessions.CsrfRefused": "answered by the review pages as a page asking to reload "
                                                      "the form",
}


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class a framejudge module defines (warnings apart: they are not raised)."""
    found = {}
    for info in pkgutil.walk_packages(framejudge.__path__, "framejudge."):
        if info.name.endswith(".__main__"):  # running it is what importing it does
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, BaseException) and not issubclass(obj, Warning)
                    and obj.__module__ == module.__name__):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


EXCEPTIONS = defined_exceptions()
ERRORS = [cls for cls in EXCEPTIONS.values() if issubclass(cls, FramejudgeError)]


def test_every_error_a_user_can_cause_is_a_framejudge_error():
    others = sorted(name for name, cls in EXCEPTIONS.items() if not issubclass(cls, FramejudgeError))
    assert others == sorted(INTERNAL), "a new exception class: a FramejudgeError, or listed here with the reason"
    assert all(INTERNAL.values())
    assert len(ERRORS) > 30  # the walk found the package's modules


def test_codes_are_unique_stable_names():
    codes = {}
    for cls in ERRORS:
        code = vars(cls).get("code")
        assert code is not None, f"{cls.__qualname__} has no code of its own"
        assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", code), code
        assert code not in codes, f"{cls.__qualname__} and {codes.get(code)} share the code {code!r}"
        codes[code] = cls.__qualname__


def test_the_built_in_kinds_stay():
    """`except ValueError` around a library call keeps catching its errors."""
    from framejudge.calibration.inputs import LabelsError
    from framejudge.files import NotJSON, OutputError
    from framejudge.frame_sampler import FrameSamplerError, UnguardedScript
    from framejudge.judge import ItemsError, JudgeSpecError
    from framejudge.rubrics import RubricError
    from framejudge.runner.judges import JudgesFileError

    for cls in (LabelsError, NotJSON, OutputError, ItemsError, JudgeSpecError, JudgesFileError):
        assert issubclass(cls, FramejudgeError) and issubclass(cls, ValueError)
    assert issubclass(UnguardedScript, RuntimeError)
    assert issubclass(FrameSamplerError, FramejudgeError) and issubclass(RubricError, FramejudgeError)


# the command line ------------------------------------------------------------------------------

runner = CliRunner()


def refused_with(res, exc: FramejudgeError) -> None:
    """Exit 2, and stderr holds the error's message alone, as one `error:` line."""
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.stderr == f"error: {exc}\n", res.stderr
    assert res.stdout == ""


def test_cli_items_error(tmp_path):
    from framejudge.cli import app
    from framejudge.judge import ItemsError, load_items

    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a"}\n', encoding="utf-8")
    with pytest.raises(ItemsError) as caught:
        load_items(items)
    refused_with(runner.invoke(app, ["grade", str(items), "--out", str(tmp_path / "v.jsonl")]), caught.value)


def test_cli_rubric_error():
    from framejudge.cli import app
    from framejudge.rubrics import RubricError, get_rubric

    with pytest.raises(RubricError) as caught:
        get_rubric("no-such-rubric")
    refused_with(runner.invoke(app, ["rubrics", "show", "no-such-rubric"]), caught.value)


def test_cli_frame_sampler_error(tmp_path):
    from framejudge.cli import app
    from framejudge.frame_sampler import VideoNotFound, sample_frames

    video = tmp_path / "missing.mp4"
    with pytest.raises(VideoNotFound) as caught:
        sample_frames(video, cache=None)
    assert caught.value.code == "video_not_found"
    refused_with(runner.invoke(app, ["frames", str(video), "--no-cache"]), caught.value)


def test_cli_output_error(tmp_path):
    from framejudge.cli import app
    from framejudge.files import OutputError, check_output

    predictions = tmp_path / "p.jsonl"
    predictions.write_text("", encoding="utf-8")
    with pytest.raises(OutputError) as caught:
        check_output(predictions, "details", inputs=[predictions])
    refused_with(runner.invoke(app, ["mcq", "score", str(predictions), str(predictions), "--details",
                                     str(predictions)]), caught.value)


def test_cli_labels_error_from_the_console_script(tmp_path):
    """The same through `python -m framejudge.cli`, as the installed command runs."""
    human = tmp_path / "human.jsonl"
    human.write_text("not json\n", encoding="utf-8")
    verdicts = tmp_path / "v.jsonl"
    verdicts.write_text("", encoding="utf-8")
    from framejudge.calibration.inputs import LabelsError, load_human_labels

    with pytest.raises(LabelsError) as caught:
        load_human_labels(human)
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "calibrate", "--human", str(human), "--judge",
                           str(verdicts)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"error: {caught.value}\n" and proc.stdout == ""


# the service ---------------------------------------------------------------------------------------


@pytest.fixture()
def client(tmp_path):
    from framejudge.service.app import create_app
    from framejudge.service.settings import Settings
    from framejudge.service.store import create_key, engine_for

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=tmp_path)
    app = create_app(settings)
    key = create_key(engine_for(settings.database_url), ["grade"])
    return TestClient(app), {"Authorization": f"Bearer {key}"}


ITEM = {"id": "a", "turns": [{"question": "What number?", "response_a": "10.", "response_b": "I cannot say."}]}


def test_service_answers_a_mapped_error_with_its_code(client):
    http, auth = client
    r = http.post("/v1/grade", json={"item": ITEM, "rubric": "nope"}, headers=auth)
    assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["title"] == "Unknown rubric" and body["code"] == "invalid_rubric"
    assert "no rubric with id 'nope'" in body["detail"]
    refused = http.get("/v1/rubrics")  # a problem no FramejudgeError caused has no code
    assert refused.status_code == 401 and "code" not in refused.json()


def test_service_answers_any_framejudge_error_as_a_problem(client):
    """One that no route answers itself: a problem document with its code, not a 500."""
    from framejudge.frame_sampler import VideoNotFound
    from framejudge.judge import ItemsError

    http, _ = client

    def items() -> None:
        raise ItemsError("items.jsonl:3: no turns")

    def video() -> None:
        raise VideoNotFound("no such file", "/srv/videos/a.mp4")

    http.app.add_api_route("/items-error", items)
    http.app.add_api_route("/video-error", video)
    r = http.get("/items-error")
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    assert r.json() == {"type": "about:blank", "title": "Invalid request", "status": 422,
                        "detail": "items.jsonl:3: no turns", "code": "invalid_items"}
    r = http.get("/video-error")  # as the routes answer it: the server's path to the video is not shown
    assert r.status_code == 404
    assert r.json() == {"type": "about:blank", "title": "No such video", "status": 404, "detail": "no such file",
                        "code": "video_not_found"}
