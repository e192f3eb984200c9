"""Batch runs (`framejudge grade --batch`) against a loopback server that speaks OpenAI's Files and
Batches APIs: what is uploaded, what the next run collects, re-asks and failed requests going in the
next batch, and the same records an online run writes."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import threading
import time
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

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
    the test calls `finish(answer)`, which writes the output and error files as OpenAI does; the
    batches listed newest first (`GET /v1/batches?limit=&after=`), with their metadata.

    `drop_creates = n`: the next n create calls make their batch and then close the connection
    without an answer (what a client cut off while it waits sees). `hold_creates = True`: each create
    call makes its batch, sets `held`, and answers only once `release` is set. `refuse_creates`: the
    next create calls are answered with these (status, error body), no batch made; `refuse_listings`:
    the next listings of batches likewise."""

    def __init__(self) -> None:
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.calls: list[tuple[str, str]] = []
        self.drop_creates = 0
        self.refuse_creates: list[tuple[int, dict]] = []
        self.refuse_listings: list[tuple[int, dict]] = []
        self.hold_creates = False
        self.held = threading.Event()
        self.release = threading.Event()
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
                    if server.refuse_creates:
                        return self.reply(*server.refuse_creates.pop(0))
                    request = json.loads(body)
                    batch_id = f"batch_{len(server.batches) + 1}"
                    server.batches[batch_id] = {
                        "id": batch_id, "object": "batch", "endpoint": request["endpoint"], "errors": None,
                        "input_file_id": request["input_file_id"], "completion_window": request["completion_window"],
                        "status": "in_progress", "output_file_id": None, "error_file_id": None,
                        "created_at": int(time.time()), "metadata": request.get("metadata"),
                        "request_counts": {"total": 0, "completed": 0, "failed": 0}}
                    if server.drop_creates:
                        server.drop_creates -= 1
                        self.close_connection = True
                        return  # made, and no answer
                    if server.hold_creates:
                        server.held.set()
                        server.release.wait(60)
                        try:
                            return self.reply(200, server.batches[batch_id])
                        except (BrokenPipeError, ConnectionResetError):
                            return None  # the client is gone
                    return self.reply(200, server.batches[batch_id])
                return self.reply(404, {"error": {"message": "no such route"}})

            def do_GET(self):
                server.calls.append(("GET", self.path))
                path, _, query = self.path.partition("?")
                if path.endswith("/batches"):
                    if server.refuse_listings:
                        return self.reply(*server.refuse_listings.pop(0))
                    return self.reply(200, server.listing(parse_qs(query)))
                parts = path.split("/")
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

    def listing(self, query: dict[str, list[str]]) -> dict:
        """A page of the batches, newest first, after the batch `after` names, `limit` of them."""
        batches = sorted(self.batches.values(), key=lambda b: int(b["id"].removeprefix("batch_")), reverse=True)
        after = (query.get("after") or [None])[0]
        if after:
            batches = batches[[b["id"] for b in batches].index(after) + 1:]
        limit = int((query.get("limit") or ["20"])[0])
        page = batches[:limit]
        return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None, "has_more": len(batches) > limit}

    def requests(self, batch_id: str) -> list[dict]:
        data = self.files[self.batches[batch_id]["input_file_id"]]["content"].decode()
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def finish(self, batch_id: str, answer) -> None:
        """`answer(request line)`: a chat completion body, or (status, error body) for a failed line,
        or a list of those: a line each."""
        done, failed = [], []
        for line in self.requests(batch_id):
            got = answer(line)
            for one in got if isinstance(got, list) else [got]:
                if isinstance(one, tuple):
                    failed.append({"id": f"r-{line['custom_id'][:8]}", "custom_id": line["custom_id"],
                                   "response": {"status_code": one[0], "request_id": "x", "body": one[1]},
                                   "error": None})
                else:
                    done.append({"id": f"r-{line['custom_id'][:8]}", "custom_id": line["custom_id"],
                                 "response": {"status_code": 200, "request_id": "x", "body": one}, "error": None})
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
    prompt = json.dumps(line["body"]["messages"])  # the answers fenced as data: "Response A:\n<<<response_a CODE>>>\n..."
    return completion(GOOD_SWAPPED if re.search(r"Response A:\\n<<<response_a \w+>>>\\nA blue jay", prompt) else GOOD)


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


# ---------------------------------------------------------------------- answers lost, replies twice

def api_grade(items: Path, out: Path, judges: Path) -> list:
    """A batch run through the Python API (what `grade --batch` runs)."""
    from framejudge import grade as grade_items

    return grade_items(items, judge="litellm:openai/batch-model", judges_file=judges, out=out,
                       options={"cache": False}, batch=True)


def bare(text: str) -> str:
    """`text` without its whitespace, to find in a console's output however it wraps."""
    return "".join(text.split())


def ledger_of(out: Path) -> dict:
    return json.loads(out.with_name(out.name.removesuffix(".jsonl") + ".batches.json").read_text())


@pytest.fixture
def openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def test_a_batch_made_whose_answer_was_lost_is_found_and_collected_not_sent_again(tmp_path, openai_key):
    """The provider makes the batch and the connection drops before its answer: the run stops with
    the batch kept in the ledger as asked for (its tag in the batch's metadata), the create call not
    sent again; the next run finds the batch by its tag and collects it: one batch, paid once."""
    from framejudge.runner.batch_api import BatchError

    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        server.drop_creates = 1
        with pytest.raises(BatchError, match=r"the batch of 6 request\(s\) was not accepted: .*the provider may have "
                                             r"made the batch before its answer was lost.*the next run looks for it "
                                             r"before sending its 6 request\(s\) again"):
            api_grade(items, out, judges)
        assert list(server.batches) == ["batch_1"]  # made once: the create call was not sent again
        ledger = ledger_of(out)
        [intent] = ledger["intents"]
        assert ledger["batches"] == []
        assert intent["keys"] == [line["custom_id"] for line in server.requests("batch_1")]
        assert intent["input_file_id"] == server.batches["batch_1"]["input_file_id"]
        assert server.batches["batch_1"]["metadata"] == {"framejudge_batch": intent["tag"]}

        server.finish("batch_1", answer_by_order)
        records = api_grade(items, out, judges)
        assert list(server.batches) == ["batch_1"]  # exactly one batch: nothing paid twice
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
        ledger = ledger_of(out)
        assert ledger["intents"] == []
        [found] = ledger["batches"]
        assert (found["id"], found["tag"], found["status"]) == ("batch_1", intent["tag"], "collected")
        assert found["found"] == f"its metadata framejudge_batch={intent['tag']}"


def test_a_run_killed_while_the_provider_makes_its_batch_is_followed_by_one_that_collects_it(tmp_path):
    """`grade --batch` killed (SIGKILL) after the provider made the batch, before the create call
    returned: the next run finds the batch, says so, and collects it; nothing is submitted again."""
    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "test-key", "FRAMEJUDGE_NO_CACHE": "1"}
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        server.hold_creates = True
        proc = subprocess.Popen([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out),
                                 "--judges", str(judges), "--judge", "litellm:openai/batch-model", "--batch", "--yes",
                                 "--no-cache"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            assert server.held.wait(240), "the run never asked for its batch"
        finally:
            proc.kill()
            proc.wait(60)
            server.hold_creates = False
            server.release.set()
        assert list(server.batches) == ["batch_1"]
        server.finish("batch_1", answer_by_order)
        again = grade(items, out, judges)
        assert again.returncode == 0, again.stderr
        assert list(server.batches) == ["batch_1"]  # nothing submitted again
        said = " ".join(again.stderr.split())
        assert "found batch batch_1 at the provider, asked for by an earlier run that got no answer" in said
        assert "collected 1 batch(es): batch_1" in said
        assert "3 turn(s) graded from batch replies (0 error(s))" in said
        assert len([r for r in read_records(out) if isinstance(r, Verdict)]) == 3


def test_a_batch_that_cannot_be_looked_for_stops_the_run_before_anything_is_sent(tmp_path, openai_key):
    """The listing of batches fails while a batch asked for without an answer is looked for: the run
    stops, saying what to do, and sends nothing; the next run finds the batch."""
    from framejudge.runner.batch_api import BatchError

    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        server.drop_creates = 1
        with pytest.raises(BatchError):
            api_grade(items, out, judges)
        server.refuse_listings = [(404, {"error": {"message": "no such route", "type": "invalid_request_error"}})]
        with pytest.raises(BatchError, match=r"the batches could not be listed: .*a batch of 6 request\(s\) was asked "
                                             r"for at .* and no answer was recorded; .*nothing was sent: run the same "
                                             r"command again \(where the provider cannot list its batches, delete that "
                                             r"entry from \"intents\""):
            api_grade(items, out, judges)
        assert list(server.batches) == ["batch_1"] and len(server.files) == 1
        assert len(ledger_of(out)["intents"]) == 1
        server.refuse_listings = []
        assert api_grade(items, out, judges) == []  # found, still in progress
        assert list(server.batches) == ["batch_1"] and [b["id"] for b in ledger_of(out)["batches"]] == ["batch_1"]


@pytest.mark.parametrize("status, kept", [(400, 0), (500, 1)], ids=["refused", "server-error"])
def test_a_create_refused_or_failed_without_a_batch_is_sent_once_more(tmp_path, openai_key, status, kept):
    """A create answered 400 made nothing: its intent goes. One answered 500 may have made a batch:
    its intent stays, the next run finds none, says so and sends the requests once. Either way: one
    batch."""
    from typer.testing import CliRunner

    from framejudge.cli import app
    from framejudge.runner.batch_api import BatchError

    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        server.refuse_creates = [(status, {"error": {"message": "not now", "type": "server_error"}})]
        with pytest.raises(BatchError, match=f"the batch of 6 request\\(s\\) was not accepted: .*{status}"):
            api_grade(items, out, judges)
        assert server.batches == {}
        assert len(ledger_of(out)["intents"]) == kept and ledger_of(out)["batches"] == []
        done = CliRunner().invoke(app, ["grade", str(items), "--out", str(out), "--judges", str(judges), "--judge",
                                        "litellm:openai/batch-model", "--batch", "--yes", "--no-cache"])
        assert done.exit_code == 0, done.output
        said = "".join(done.stderr.split())  # however the console wraps its lines
        assert (bare("6 request(s) of batches an earlier run asked for without an answer: the provider has no such "
                     "batch, so they are sent again") in said) == bool(kept)
        assert bare("submitted batch batch_1 (3 turn(s) waiting)") in said
        assert list(server.batches) == ["batch_1"]
        ledger = ledger_of(out)
        assert ledger["intents"] == [] and [b["id"] for b in ledger["batches"]] == ["batch_1"]
        assert ledger["batches"][0]["found"] is None
        assert len(server.requests("batch_1")) == 6


def test_two_different_replies_to_one_request_are_an_error_naming_it(tmp_path, openai_key):
    """A results file answers one request twice, differently: its turn is recorded as an error that
    names the request, the run says so, and nothing is asked again; the same reply twice is taken.
    Once the line not wanted is deleted from the replies file, the next run grades the turn."""
    from typer.testing import CliRunner

    from framejudge.cli import app

    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    other = {**GOOD, "response_a": {"category": "Not Successful", "rationale": "misses the heron"}, "preference": "B"}
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        assert api_grade(items, out, judges) == []
        lines = server.requests("batch_1")
        twice, same = lines[0]["custom_id"], lines[1]["custom_id"]

        def answers(line):
            if line["custom_id"] == twice:
                return [answer_by_order(line), completion(other)]
            if line["custom_id"] == same:
                return [answer_by_order(line), {**answer_by_order(line), "id": "chatcmpl-2", "created": 1}]
            return answer_by_order(line)

        server.finish("batch_1", answers)
        command = ["grade", str(items), "--out", str(out), "--judges", str(judges), "--judge",
                   "litellm:openai/batch-model", "--batch", "--yes", "--no-cache"]
        done = CliRunner().invoke(app, command)
        assert done.exit_code == 1, done.output  # a turn failed
        said = "".join(done.stderr.split())  # however the console wraps its lines
        assert bare(f"1 request(s) have different replies from the batch API in "
                    f"{tmp_path / 'verdicts.batch-replies.jsonl'}: {twice} (batches batch_1, batch_1)") in said
        verdicts, errors = latest(read_records(out))
        [error] = errors.values()
        assert f"the batch API gave 2 different replies to request {twice}" in error.message
        assert len(verdicts) == 2
        assert list(server.batches) == ["batch_1"]  # nothing asked again

        replies = tmp_path / "verdicts.batch-replies.jsonl"
        kept = [line for line in replies.read_text().splitlines()
                if not (json.loads(line)["key"] == twice and "misses the heron" in json.dumps(json.loads(line)))]
        assert len(kept) == len(replies.read_text().splitlines()) - 1
        replies.write_text("".join(line + "\n" for line in kept))
        records = api_grade(items, out, judges)
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
        assert list(server.batches) == ["batch_1"]
