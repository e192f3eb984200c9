"""Batch runs (`framejudge grade --batch`) against a loopback server that speaks OpenAI's Files and
Batches APIs: what is uploaded, what the next run collects, re-asks and failed requests going in the
next batch, and the same records an online run writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("litellm")

from framejudge.records import latest, read_records
from framejudge.schema import JudgeError, Verdict

ROOT = Path(__file__).resolve().parents[2]

GOOD = {"response_a": {"category": "Successful", "rationale": "matches the golden response"},
        "response_b": {"category": "Not Successful", "rationale": "names another bird"},
        "preference": "A", "deciding_criterion": "category"}
GOOD_SWAPPED = {"response_a": GOOD["response_b"], "response_b": GOOD["response_a"], "preference": "B",
                "deciding_criterion": "category"}
BREAKS_RUBRIC = {**GOOD, "preference": "B", "deciding_criterion": "helpfulness"}


def completion(content: dict | str) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "batch-model-2026-11",
            "choices": [{"index": 0, "message": {"role": "assistant",
                                                 "content": content if isinstance(content, str) else json.dumps(content)},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}


class BatchServer:
    """OpenAI's Files and Batches APIs on loopback: uploads kept, batches left `in_progress` until
    the test calls `finish(answer)`, which writes the output and error files as OpenAI does."""

    def __init__(self) -> None:
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.calls: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status: int, payload: dict | bytes) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream" if isinstance(payload, bytes)
                                 else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                server.calls.append(("POST", self.path))
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path.endswith("/files"):
                    message = BytesParser(policy=HTTP).parsebytes(
                        b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + body)
                    parts = {p.get_param("name", header="content-disposition"): p for p in message.iter_parts()}
                    content = parts["file"].get_payload(decode=True)
                    purpose = parts["purpose"].get_payload(decode=True).decode()
                    return self.reply(200, server.add_file(content, purpose))
                if self.path.endswith("/batches"):
                    request = json.loads(body)
                    batch_id = f"batch_{len(server.batches) + 1}"
                    server.batches[batch_id] = {
                        "id": batch_id, "object": "batch", "endpoint": request["endpoint"], "errors": None,
                        "input_file_id": request["input_file_id"], "completion_window": request["completion_window"],
                        "status": "in_progress", "output_file_id": None, "error_file_id": None,
                        "created_at": int(time.time()),
                        "request_counts": {"total": 0, "completed": 0, "failed": 0}}
                    return self.reply(200, server.batches[batch_id])
                return self.reply(404, {"error": {"message": "no such route"}})

            def do_GET(self):
                server.calls.append(("GET", self.path))
                parts = self.path.split("/")
                if "batches" in parts:
                    return self.reply(200, server.batches[parts[-1]])
                if parts[-1] == "content":
                    return self.reply(200, server.files[parts[-2]]["content"])
                return self.reply(404, {"error": {"message": "no such route"}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def add_file(self, content: bytes, purpose: str) -> dict:
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                               "filename": f"{file_id}.jsonl", "purpose": purpose, "status": "processed",
                               "content": content}
        return {k: v for k, v in self.files[file_id].items() if k != "content"}

    def requests(self, batch_id: str) -> list[dict]:
        data = self.files[self.batches[batch_id]["input_file_id"]]["content"].decode()
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def finish(self, batch_id: str, answer) -> None:
        """`answer(request line)`: a chat completion body, or (status, error body) for a failed line."""
        done, failed = [], []
        for line in self.requests(batch_id):
            got = answer(line)
            if isinstance(got, tuple):
                failed.append({"id": f"r-{line['custom_id'][:8]}", "custom_id": line["custom_id"],
                               "response": {"status_code": got[0], "request_id": "x", "body": got[1]}, "error": None})
            else:
                done.append({"id": f"r-{line['custom_id'][:8]}", "custom_id": line["custom_id"],
                             "response": {"status_code": 200, "request_id": "x", "body": got}, "error": None})
        batch = self.batches[batch_id]
        batch["status"] = "completed"
        if done:
            batch["output_file_id"] = self.add_file("".join(json.dumps(r) + "\n" for r in done).encode(),
                                                    "batch_output")["id"]
        if failed:
            batch["error_file_id"] = self.add_file("".join(json.dumps(r) + "\n" for r in failed).encode(),
                                                   "batch_output")["id"]

    def __enter__(self):
        self.thread.start()
        return self

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def answer_by_order(line: dict) -> dict:
    """A valid judgement for either order of the pair (the swapped call sees B's answer first)."""
    prompt = json.dumps(line["body"]["messages"])
    return completion(GOOD_SWAPPED if "Response A: A blue jay" in prompt else GOOD)


def write_items(tmp_path: Path) -> Path:
    rows = [{"id": f"bird-{k}", "turns": [{"question": f"What bird is in clip {k}?", "golden": "A heron.",
                                           "response_a": "A grey heron.", "response_b": "A blue jay."}]}
            for k in range(3)]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def judges_file(tmp_path: Path, base: str) -> Path:
    path = tmp_path / "judges.yaml"
    path.write_text(f"judges:\n  - spec: litellm:openai/batch-model\n    api_base: {base}\n"
                    "    price: {prompt_usd_per_token: 0.000001, completion_usd_per_token: 0.000004}\n")
    return path


def grade(items: Path, out: Path, judges: Path, *more: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "test-key", "FRAMEJUDGE_NO_CACHE": "1"}
    return subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out),
                           "--judges", str(judges), "--judge", "litellm:openai/batch-model", "--batch", "--yes",
                           "--no-cache", *more], capture_output=True, text=True, timeout=300, env=env)


def test_a_batch_run_submits_then_collects_and_writes_the_records_an_online_run_writes(tmp_path):
    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        first = grade(items, out, judges)
        assert first.returncode == 0, first.stderr
        assert "submitted batch batch_1 (3 turn(s) waiting" in first.stderr
        assert not out.exists() or out.read_text() == ""  # nothing graded yet
        # what was uploaded: one chat-completions line per call, swap on (both orders), keyed by its body
        lines = server.requests("batch_1")
        assert len(lines) == 6
        assert {line["url"] for line in lines} == {"/v1/chat/completions"}
        assert all(line["body"]["model"] == "batch-model" for line in lines)
        # the reply's JSON schema, as an online call to OpenAI sends it
        assert all(line["body"]["response_format"]["type"] == "json_schema" for line in lines)
        assert all(line["body"]["response_format"]["json_schema"]["schema"]["type"] == "object" for line in lines)
        assert len({line["custom_id"] for line in lines}) == 6
        ledger = json.loads((tmp_path / "verdicts.batches.json").read_text())
        assert [b["id"] for b in ledger["batches"]] == ["batch_1"]

        again = grade(items, out, judges)  # still in progress: nothing new is submitted
        assert again.returncode == 0, again.stderr
        assert "3 turn(s) wait for batch(es) batch_1" in again.stderr
        assert len(server.batches) == 1

        server.finish("batch_1", answer_by_order)
        third = grade(items, out, judges)
        assert third.returncode == 0, third.stderr
        assert "collected 1 batch(es): batch_1" in third.stderr
        assert "3 turn(s) graded from batch replies (0 error(s))" in third.stderr
        verdicts = [r for r in read_records(out) if isinstance(r, Verdict)]
        assert len(verdicts) == 3
        for v in verdicts:
            assert v.response_a.category.value == "Successful" and v.preference.value == "A"
            assert v.swap is not None and v.swap.consistent
            assert any("batch API" in n for n in v.provenance.notes)
            # two calls of 1,000 + 100 tokens at the judges file's price, halved
            assert v.provenance.usage.cost_usd == pytest.approx(2 * (1000 * 1e-6 + 100 * 4e-6) * 0.5)
        summary = json.loads(third.stdout)
        assert summary["turns_graded"] == 3

        fourth = grade(items, out, judges)  # everything graded: nothing sent, nothing written twice
        assert fourth.returncode == 0, fourth.stderr
        assert len(server.batches) == 1
        assert len([r for r in read_records(out) if isinstance(r, Verdict)]) == 3


def test_re_asks_and_failed_requests_go_in_the_next_batch(tmp_path):
    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        assert grade(items, out, judges).returncode == 0
        lines = server.requests("batch_1")
        broken = lines[0]["custom_id"]  # its reply breaks the rubric: re-asked with the reason
        failed = lines[1]["custom_id"]  # the provider fails it: asked again

        def first_answers(line):
            if line["custom_id"] == broken:
                return completion(BREAKS_RUBRIC)
            if line["custom_id"] == failed:
                return (500, {"error": {"message": "internal error", "type": "server_error"}})
            return answer_by_order(line)

        server.finish("batch_1", first_answers)
        second = grade(items, out, judges)
        assert second.returncode == 0, second.stderr
        assert "submitted batch batch_2" in second.stderr
        nxt = server.requests("batch_2")
        assert failed in {line["custom_id"] for line in nxt}  # the same request again
        reask = [line for line in nxt if line["custom_id"] not in {x["custom_id"] for x in lines}]
        assert len(reask) == 1
        messages = reask[0]["body"]["messages"]
        assert messages[-2]["role"] == "assistant" and "helpfulness" in messages[-2]["content"]
        assert messages[-1]["role"] == "user"  # the validator's reason
        server.finish("batch_2", answer_by_order)
        third = grade(items, out, judges)
        assert third.returncode == 0, third.stderr
        verdicts, errors = latest(read_records(out))
        assert len(verdicts) == 3 and not errors


def test_a_request_the_provider_keeps_failing_becomes_a_judge_error(tmp_path):
    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        assert grade(items, out, judges).returncode == 0
        doomed = server.requests("batch_1")[0]["custom_id"]

        def answers(line):
            return (500, {"error": {"message": "boom"}}) if line["custom_id"] == doomed else answer_by_order(line)

        for n in range(1, 4):
            server.finish(f"batch_{n}", answers)
            run = grade(items, out, judges)
            assert run.returncode == (1 if n == 3 else 0), run.stderr  # 1 once a turn has a judge error
        assert "backend_error: 1 turn(s), the first: item" in run.stderr
        records = read_records(out)
        errors = [r for r in records if isinstance(r, JudgeError)]
        assert len(errors) == 1 and "failed this request 3 times" in errors[0].message
        assert len([r for r in records if isinstance(r, Verdict)]) == 2


def test_a_schema_the_batch_api_refuses_is_asked_again_in_json_mode(tmp_path):
    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        assert grade(items, out, judges).returncode == 0
        server.finish("batch_1", lambda line: (400, {"error": {"message": "Invalid schema for response_format",
                                                               "type": "invalid_request_error"}}))
        second = grade(items, out, judges)
        assert second.returncode == 0, second.stderr
        again = server.requests("batch_2")
        assert len(again) == 6
        assert all(line["body"]["response_format"] == {"type": "json_object"} for line in again)
        server.finish("batch_2", answer_by_order)
        assert grade(items, out, judges).returncode == 0
        verdicts = [r for r in read_records(out) if isinstance(r, Verdict)]
        assert len(verdicts) == 3
        assert all(any("refused the reply's JSON schema" in n for n in v.provenance.notes) or
                   any("output mode: json_object" in n for n in v.provenance.notes) for v in verdicts)


@pytest.mark.parametrize("spec, words", [
    ("reference", "calls no provider"),
    ("litellm:vertex_ai_beta/gemini-2.5-flash", "goes to 'vertex_ai_beta', which it does not speak (litellm's "
                                                "vertex_ai_beta route; the same models as litellm:vertex_ai/<model>"),
    ("litellm:vertex_ai/claude-sonnet-4", "speaks Vertex AI's batch prediction for Gemini models "
                                          "(litellm:vertex_ai/gemini-...); 'claude-sonnet-4' is not one"),
    ("litellm:mistral/mistral-large-latest", "goes to 'mistral', which it does not speak: grade it online"),
])
def test_judges_without_a_batch_api_framejudge_speaks_are_refused(tmp_path, spec, words):
    items = write_items(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GEMINI_API_KEY": "k", "VERTEXAI_PROJECT": "p"}
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out",
                           str(tmp_path / "v.jsonl"), "--judge", spec, "--batch", "--yes", "--no-cache"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "error: --batch" in proc.stderr and words in proc.stderr


def test_a_flex_judge_graded_in_a_batch_is_billed_at_the_batch_price_alone(tmp_path):
    """A batch is its own tier: a judge whose entry asks for flex puts no service tier in its batch
    lines, and its cost is halved once (the batch API's share), not twice."""
    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        judges.write_text(judges.read_text() + "    service_tier: flex\n")
        assert grade(items, out, judges).returncode == 0
        lines = server.requests("batch_1")
        assert lines and all("service_tier" not in line["body"] for line in lines)
        server.finish("batch_1", answer_by_order)
        done = grade(items, out, judges)
        assert done.returncode == 0, done.stderr
    verdicts = [r for r in read_records(out) if isinstance(r, Verdict)]
    assert len(verdicts) == 3
    for v in verdicts:
        assert v.provenance.usage.cost_usd == pytest.approx(2 * (1000 * 1e-6 + 100 * 4e-6) * 0.5)


def test_the_estimate_before_a_batch_run_is_at_the_batch_apis_share_of_the_price(tmp_path):
    """`grade --batch` prints its estimate at the price the batch is billed at (OpenAI's: half),
    saying so; nothing is sent before the run is confirmed."""
    import re

    items = write_items(tmp_path)
    judges = tmp_path / "judges.yaml"
    # a server that answers (the preflight asks it before the online estimate; the runs stop before any call)
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    judges.write_text(f"judges:\n  - spec: litellm:openai/batch-model\n    api_base: http://127.0.0.1:{server.server_address[1]}/v1\n"
                      "    price: {prompt_usd_per_token: 0.001, completion_usd_per_token: 0.004}\n")

    def estimate(*more: str) -> tuple[str, float]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "test-key", "FRAMEJUDGE_NO_CACHE": "1",
               "COLUMNS": "400"}
        proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out",
                               str(tmp_path / "v.jsonl"), "--judges", str(judges), "--judge",
                               "litellm:openai/batch-model", "--no-cache", *more], capture_output=True, text=True,
                              timeout=300, env=env, stdin=subprocess.DEVNULL)
        assert proc.returncode == 2 and "pass --yes" in proc.stderr, proc.stderr  # nothing was spent
        line = next(x for x in proc.stderr.splitlines() if "judge call(s)" in x)
        return line, float(re.search(r"about \$([\d.]+)", line)[1])

    try:
        online, price = estimate()
        batched, batch_price = estimate("--batch")
        assert batch_price == pytest.approx(price / 2, abs=0.01) and price > 1
        assert "OpenAI's Batch API: 50% of the synchronous price" in batched and "Batch API" not in online
        assert not (tmp_path / "v.batches.json").exists()
        # a batch is a tier of its own: a flex judge's batch is halved once, as it is billed
        judges.write_text(judges.read_text() + "    service_tier: flex\n")
        flex, flex_price = estimate()
        assert flex_price == pytest.approx(price / 2, abs=0.01) and "flex" in flex
        flex_batched, flex_batch_price = estimate("--batch")
        assert flex_batch_price == pytest.approx(batch_price, abs=0.01) and "flex" not in flex_batched
    finally:
        server.shutdown()
        server.server_close()
