"""Batch runs of Gemini API judges (`gemini/`) against a loopback server that speaks Gemini's
generateContent and the Gemini API's Batch Mode (tests/judge/providers.py: GeminiBatchServer): the
Files API's resumable upload of a JSONL file of `{"key", "request"}` lines, each request the
GenerateContentRequest litellm sends online for the same call (frames as inline data in order, the
rubric as the system instruction, the reply's JSON schema, the token limit), keyed by its sha256;
batchGenerateContent naming that file; the batch's operation asked after; its responses file
downloaded. A run submits, the next collects and writes the records an online run of the same items
writes, at half the cost; failed lines are asked again, then become judge errors."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("litellm")

from framejudge import grade
from framejudge.records import latest, read_records
from framejudge.rubrics import get_rubric
from framejudge.rubrics.prompt import render_prompt
from framejudge.schema import Item, JudgeError, Verdict
from tests.runner.batches import FPS, assert_collected_as_online, frame_number, judgement_for, write_items
from tests.judge.providers import GeminiBatchServer, GeminiServer, Image

ROOT = Path(__file__).resolve().parents[2]
MODEL = "gemini-2.5-flash"


def by_order(seen) -> str:
    return judgement_for(seen.body["contents"])


def by_line(line: dict) -> str:
    return judgement_for(line["request"]["contents"])


@pytest.fixture(scope="module")
def items(tmp_path_factory) -> Path:
    return write_items(tmp_path_factory.mktemp("gemini-batch"))


def judges_file(tmp_path: Path, server: GeminiServer) -> Path:
    # no log-probabilities: a batch line asks for none, so the online run that is compared asks for none
    path = tmp_path / "judges.yaml"
    path.write_text(f"judges:\n  - spec: litellm:gemini/{MODEL}\n    api_base: {server.api_base}\n"
                    "    api_key_env: GEMINI_API_KEY\n    logprobs: false\n")
    return path


def run(items: Path, out: Path, judges: Path, **kw):
    return grade(items, judge=f"litellm:gemini/{MODEL}", judges_file=judges, out=out,
                 options={"cache": False, "sampler": {"n": 4}}, **kw)


def only_batch(server: GeminiBatchServer) -> str:
    [name] = server.batches
    return name


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "batch-test-key")


def test_a_batch_run_sends_the_online_requests_and_writes_the_online_records_at_half_the_cost(tmp_path, items):
    with GeminiBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server)
        online = run(items, tmp_path / "online.jsonl", judges)
        sent_online = [c.body for c in server.calls if c.path.endswith(":generateContent")]
        assert len(online) == 3 and all(isinstance(r, Verdict) for r in online)
        assert len(sent_online) == 6  # both orders of each of three turns
        assert {c.path for c in server.calls} == {f"/v1beta/models/{MODEL}:generateContent"}

        out = tmp_path / "batch.jsonl"
        assert run(items, out, judges, batch=True) == []  # submitted, nothing graded yet
        name = only_batch(server)
        lines = server.requests_of(name)
        create = server.batch_calls[name]

        # the upload: a resumable start with the key, then the bytes to the URL it gave
        start, upload = [c for c in server.calls if c.path.startswith("/upload/v1beta/files")]
        assert start.path == "/upload/v1beta/files" and start.headers["x-goog-api-key"] == "batch-test-key"
        assert start.headers["x-goog-upload-header-content-type"] == "application/jsonl"
        assert int(start.headers["x-goog-upload-header-content-length"]) == len(upload.body)
        assert upload.headers["x-goog-upload-command"] == "upload, finalize"
        # the batch: made for the model, of the uploaded file, with the key
        assert create.path == f"/v1beta/models/{MODEL}:batchGenerateContent"
        assert create.headers["x-goog-api-key"] == "batch-test-key"
        [file_name] = server.files
        assert create.body["batch"]["input_config"] == {"file_name": file_name}
        assert create.body["batch"]["display_name"].startswith("framejudge-")

        # the input file: one line per call, its request the body litellm sent online for that call,
        # its key the sha256 of that body
        assert len(lines) == 6
        assert sorted(json.dumps(line["request"], sort_keys=True) for line in lines) == \
            sorted(json.dumps(b, sort_keys=True) for b in sent_online)
        system = render_prompt(get_rubric("video-qa"), Item.model_validate(
            {"id": "x", "turns": [{"question": "q", "golden": "g", "response_a": "a"}]}), [], 0).messages[0]["content"]
        for line in lines:
            request = line["request"]
            canonical = json.dumps(request, sort_keys=True, separators=(",", ":")).encode()
            assert line["key"] == hashlib.sha256(canonical).hexdigest()
            assert server.system_text(request) == system
            assert server.temperature(request) == 0 and request["generationConfig"]["max_output_tokens"] == 1024
            # the reply held to the verdict's schema, as litellm holds Gemini 2 and later online
            assert server.json_mode(request) == "application/json"
            schema = server.schema(request)
            assert schema is not None and set(schema["properties"]) >= {"response_a", "response_b", "preference"}
        # the frames as inline images, in order, each labelled with its time just before it
        with_video = [line["request"] for line in lines if "clip 0" in json.dumps(line["request"]["contents"])]
        assert len(with_video) == 2
        timestamps = {v.item_id: v.provenance.frame_timestamps for v in online}["bird-0"]
        for request in with_video:
            images = server.images(request)
            assert [i.mime for i in images] == ["image/jpeg"] * 4
            assert [frame_number(i) for i in images] == [round(t * FPS) for t in timestamps]
            parts = server.user_parts(request)
            assert [parts[k - 1] for k, p in enumerate(parts) if isinstance(p, Image)] == \
                [f"[t = {t:.2f} s]" for t in timestamps]
        without = [line["request"] for line in lines if "clip 2" in json.dumps(line["request"]["contents"])]
        assert len(without) == 2 and all(server.images(r) == [] for r in without)

        asked = len(server.requests)
        assert run(items, out, judges, batch=True) == []  # still pending: asked after, nothing new sent
        assert len(server.batches) == 1 and len(server.files) == 1
        assert [r.path for r in server.requests[asked:]] == [f"/v1beta/{name}"]

        server.finish(name)
        records = run(items, out, judges, batch=True)
        assert len(records) == 3
        assert_collected_as_online(records, online, "the Gemini API's Batch Mode")
        assert f"/download/v1beta/files/batch-{name.removeprefix('batches/')}:download?alt=media" in \
            [r.path for r in server.requests]

        again = run(items, out, judges, batch=True)  # everything graded: nothing sent, nothing written twice
        assert len(again) == 3 and len(server.batches) == 1
        assert len([r for r in read_records(out) if isinstance(r, Verdict)]) == 3


def test_failed_lines_and_missing_lines_are_asked_again(tmp_path, items):
    with GeminiBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, batch=True)
        first = only_batch(server)
        keys = [line["key"] for line in server.requests_of(first)]
        fates = {keys[0]: ("error", 13, "Internal error encountered."), keys[1]: ("error", 14, "The service is "
                                                                                   "currently unavailable.")}
        server.finish(first, lambda line: None if line["key"] == keys[2] else fates.get(line["key"]) or by_line(line))

        run(items, out, judges, batch=True)
        second = [b for b in server.batches if b != first]
        assert len(second) == 1
        assert {line["key"] for line in server.requests_of(second[0])} == set(keys[:3])  # the same requests again
        ledger = json.loads((tmp_path / "batch.batches.json").read_text())
        assert ledger["failures"] == {keys[0]: 1, keys[1]: 1}  # a failed line counts; one with no line does not
        replies = [json.loads(line) for line in (tmp_path / "batch.batch-replies.jsonl").read_text().splitlines()]
        assert {r["key"]: r["status_code"] for r in replies if "error" in r} == {keys[0]: 500, keys[1]: 503}

        server.finish(second[0], by_line)
        records = run(items, out, judges, batch=True)
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
        verdicts, errors = latest(read_records(out))
        assert len(verdicts) == 3 and not errors


@pytest.mark.parametrize("state, names", [("EXPIRED", "BATCH_STATE_"), ("CANCELLED", "BATCH_STATE_"),
                                          ("FAILED", "BATCH_STATE_"), ("EXPIRED", "JOB_STATE_")])
def test_a_batch_that_ends_without_results_gives_its_requests_back(tmp_path, items, state, names):
    # the states by the API's names, and by the names the guide's examples use
    with GeminiBatchServer(by_order, states=names) as server:
        judges = judges_file(tmp_path, server)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, batch=True)
        first = only_batch(server)
        server.end(first, state)
        assert run(items, out, judges, batch=True) == []
        [second] = [b for b in server.batches if b != first]
        assert sorted(line["key"] for line in server.requests_of(second)) == \
            sorted(line["key"] for line in server.requests_of(first))
        ledger = json.loads((tmp_path / "batch.batches.json").read_text())
        assert [(b["status"], b["provider_status"]) for b in ledger["batches"]] == \
            [("failed", f"{names}{state}"), ("submitted", f"{names}PENDING")]
        assert ledger["failures"] == {}
        server.finish(second, by_line)
        assert len(run(items, out, judges, batch=True)) == 3


def test_a_request_gemini_keeps_failing_becomes_a_judge_error(tmp_path, items):
    with GeminiBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, batch=True)
        doomed = server.requests_of(only_batch(server))[0]["key"]

        def answers(line):
            return ("error", 8, "Resource has been exhausted (e.g. check quota).") if line["key"] == doomed \
                else by_line(line)

        for _ in range(3):
            server.finish(list(server.batches)[-1], answers)
            records = run(items, out, judges, batch=True)
        errors = [r for r in records if isinstance(r, JudgeError)]
        assert len(errors) == 1 and "failed this request 3 times" in errors[0].message
        assert "Resource has been exhausted" in errors[0].message
        assert len([r for r in records if isinstance(r, Verdict)]) == 2


def test_a_schema_gemini_refuses_in_a_batch_is_asked_again_in_json_mode(tmp_path, items):
    with GeminiBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, batch=True)
        first = only_batch(server)
        server.finish(first, lambda line: ("error", 3, 'Invalid JSON payload received. Unknown name '
                                                       '"response_json_schema" at \'generation_config\''))
        assert run(items, out, judges, batch=True) == []
        [second] = [b for b in server.batches if b != first]
        again = [line["request"] for line in server.requests_of(second)]
        # JSON mode as litellm sends it online to Gemini: the JSON MIME type, no schema
        assert len(again) == 6
        assert all(server.json_mode(r) == "application/json" and server.schema(r) is None for r in again)
        server.finish(second, by_line)
        records = run(items, out, judges, batch=True)
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
        assert all(any("refused the reply's JSON schema" in n or "output mode: json_object" in n
                       for n in r.provenance.notes) for r in records)


def test_requests_beyond_a_batchs_limit_go_in_more_batches(tmp_path, items, monkeypatch):
    from framejudge.runner.batch_api import BATCH_APIS

    monkeypatch.setattr(BATCH_APIS["gemini"], "max_requests", 4)
    with GeminiBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, batch=True)
        assert [len(server.requests_of(b)) for b in server.batches] == [4, 2]
        assert len(server.files) == 2  # an input file each
        ledger = json.loads((tmp_path / "batch.batches.json").read_text())
        assert [b["id"] for b in ledger["batches"]] == list(server.batches)
        assert [b["input_file_id"] for b in ledger["batches"]] == \
            [server.batch_calls[b].body["batch"]["input_config"]["file_name"] for b in server.batches]
        for name in server.batches:
            server.finish(name, by_line)
        records = run(items, out, judges, batch=True)
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)


def test_the_command_line_submits_then_collects(tmp_path, items):
    with GeminiBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server)
        out = tmp_path / "verdicts.jsonl"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FRAMEJUDGE_NO_CACHE": "1"}
        command = [sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out), "--judges",
                   str(judges), "--judge", f"litellm:gemini/{MODEL}", "--batch", "--yes", "--no-cache", "-n", "4"]
        first = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert first.returncode == 0, first.stderr
        name = only_batch(server)
        assert f"submitted batch {name} (3 turn(s) waiting" in first.stderr
        server.finish(name, by_line)
        second = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert second.returncode == 0, second.stderr
        assert f"collected 1 batch(es): {name}" in second.stderr
        assert "3 turn(s) graded from batch replies (0 error(s))" in second.stderr
        assert json.loads(second.stdout)["turns_graded"] == 3


def test_a_batch_the_api_refuses_is_a_clear_error(tmp_path, items, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "a-wrong-key")
    with GeminiBatchServer(by_order, key="batch-test-key") as server:
        judges = judges_file(tmp_path, server)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FRAMEJUDGE_NO_CACHE": "1"}
        proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out",
                               str(tmp_path / "v.jsonl"), "--judges", str(judges), "--judge", f"litellm:gemini/{MODEL}",
                               "--batch", "--yes", "--no-cache", "-n", "4"],
                              capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "error: the batch's requests file" in proc.stderr and "HTTP 400" in proc.stderr
        assert "API key not valid" in proc.stderr
        assert server.batches == {} and server.files == {}


def test_an_upload_url_on_another_server_is_not_sent_the_requests(tmp_path, items):
    """The Files API's upload URL comes in its answer: one that is not on the API root's origin (here
    the same loopback server under another name, which would take the bytes) is refused before the
    requests file, frames and all, is sent there; nothing is made and the ledger keeps no intent."""
    from framejudge.runner.batch_api import BatchError

    class Elsewhere(GeminiBatchServer):
        def _start(self, seen):
            status, body, headers = super()._start(seen)
            return status, body, {**headers, "X-Goog-Upload-URL": headers["X-Goog-Upload-URL"].replace(
                "127.0.0.1", "localhost")}

    with Elsewhere(by_order) as server:
        judges = judges_file(tmp_path, server)
        with pytest.raises(BatchError, match=r"the Files API's upload URL 'http://localhost:.*' is not on "
                                             r"http://127\.0\.0\.1:.*nothing sent there"):
            run(items, tmp_path / "batch.jsonl", judges, batch=True)
        assert [c.path for c in server.calls] == ["/upload/v1beta/files"]  # the start, and nothing after it
        assert server.files == {} and server.batches == {}
        assert ledger_of(tmp_path)["intents"] == []


def test_without_a_key_nothing_is_sent_and_the_error_says_so(tmp_path, items):
    # no api_base: the batch would go to Google; without a key it is refused before any call
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_BASE")}
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(tmp_path / "v.jsonl"),
                           "--judge", f"litellm:gemini/{MODEL}", "--batch", "--yes", "--no-cache", "-n", "4"],
                          capture_output=True, text=True, timeout=300,
                          env={**env, "PYTHONPATH": str(ROOT), "FRAMEJUDGE_NO_CACHE": "1"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "error: the Gemini API's Batch Mode: no API key (set GEMINI_API_KEY" in proc.stderr
    assert not (tmp_path / "v.batches.json").exists() or json.loads((tmp_path / "v.batches.json").read_text())["batches"] == []


def test_the_api_root_and_the_status_a_failed_line_reads_as(monkeypatch):
    from framejudge.judge.litellm_backend import LiteLLMJudge
    from framejudge.runner.batch_api import BATCH_APIS, _http_status

    api = BATCH_APIS["gemini"]
    monkeypatch.delenv("GEMINI_API_BASE", raising=False)
    assert api._root(LiteLLMJudge(f"gemini/{MODEL}", api_key="k")) == "https://generativelanguage.googleapis.com"
    for base in ("http://127.0.0.1:18801/v1beta", "http://127.0.0.1:18801/v1alpha/", "http://127.0.0.1:18801"):
        assert api._root(LiteLLMJudge(f"gemini/{MODEL}", api_base=base, api_key="k")) == "http://127.0.0.1:18801"
    monkeypatch.setenv("GEMINI_API_BASE", "http://127.0.0.1:18802/v1beta")
    assert api._root(LiteLLMJudge(f"gemini/{MODEL}", api_key="k")) == "http://127.0.0.1:18802"
    # google.rpc.Status codes are gRPC codes; an HTTP status or a status name is read as it is
    assert [_http_status(e) for e in ({"code": 3, "message": "m"}, {"code": 8}, {"code": 13}, {"code": 14},
                                      {"code": 400, "status": "INVALID_ARGUMENT"}, {"status": "RESOURCE_EXHAUSTED"},
                                      {"code": 429}, "broken")] == [400, 429, 500, 503, 400, 429, 429, 500]


def ledger_of(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "batch.batches.json").read_text())


def test_a_batch_made_whose_answer_was_lost_is_found_and_collected_not_sent_again(tmp_path, items):
    """The Gemini API makes the batch and the connection drops before its answer: the run stops, the
    batch kept in the ledger as asked for (its tag in the batch's display name, its file recorded);
    the next run finds it in the listing and collects it: one batch, one file, paid once."""
    from framejudge.runner.batch_api import BatchError

    with GeminiBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server)
        out = tmp_path / "batch.jsonl"
        server.drop_creates = 1
        with pytest.raises(BatchError, match=r"the batch of 6 request\(s\) was not accepted: .*the next run looks for "
                                             r"it before sending its 6 request\(s\) again"):
            run(items, out, judges, batch=True)
        name = only_batch(server)  # made, once
        [intent] = ledger_of(tmp_path)["intents"]
        assert server.batches[name]["metadata"]["displayName"] == f"framejudge-{intent['tag']}"
        assert intent["input_file_id"] == server.batches[name]["metadata"]["inputConfig"]["fileName"]
        assert intent["keys"] == [line["key"] for line in server.requests_of(name)]

        server.finish(name, by_line)
        records = run(items, out, judges, batch=True)
        assert list(server.batches) == [name] and len(server.files) == 2  # the requests and the responses
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
        ledger = ledger_of(tmp_path)
        [found] = ledger["batches"]
        assert ledger["intents"] == [] and (found["id"], found["status"]) == (name, "collected")
        assert found["found"] == f"its display name framejudge-{intent['tag']}"


def test_two_different_replies_to_one_request_are_an_error_naming_it(tmp_path, items):
    """A responses file answers one key twice, differently: the turn is an error naming the request;
    a key answered twice alike is taken."""
    other = json.dumps({"response_a": {"category": "Not Successful", "rationale": "misses the heron"},
                        "response_b": {"category": "Successful", "rationale": "a jay"}, "preference": "B",
                        "deciding_criterion": "category"})
    with GeminiBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, batch=True)
        name = only_batch(server)
        lines = server.requests_of(name)
        twice, same = lines[0]["key"], lines[1]["key"]

        def answers(line):
            text = by_line(line)
            return [text, other] if line["key"] == twice else [text, text] if line["key"] == same else text

        server.finish(name, answers)
        records = run(items, out, judges, batch=True)
        errors = [r for r in records if isinstance(r, JudgeError)]
        assert len(errors) == 1 and f"the batch API gave 2 different replies to request {twice}" in errors[0].message
        assert len([r for r in records if isinstance(r, Verdict)]) == 2
        assert list(server.batches) == [name]
