"""A batch run's calls follow no redirects, and its results files are read within caps: each line
no more than the reply cap (FRAMEJUDGE_MAX_REPLY_MB; a longer one is its request's error), each file
no more than the cap for each request in the batch, streamed as it arrives."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("litellm")

from framejudge.runner.batch_api import (BATCH_APIS, BatchError, FileCaps, _openai_line, _read_results, _send,
                                         file_caps)
from framejudge.schema.batches import SubmittedBatch
from tests.runner.test_batch_api import BatchServer, grade, judges_file, write_items
from tests.loopback import Listener

KEYS = [f"{k:064x}" for k in range(1, 5)]


class FileServer:
    """Answers every GET with `body()`'s chunks (generated as they are sent, until the client stops
    reading), or with a redirect to `redirect_to`."""

    def __init__(self, body=None, redirect_to: str | None = None, status: int = 307) -> None:
        outer = self
        self.sent = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if redirect_to is not None:
                    self.send_response(status)
                    self.send_header("Location", redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/jsonl")
                self.end_headers()  # HTTP/1.0: the body ends when the connection closes
                try:
                    for chunk in body():
                        self.wfile.write(chunk)
                        outer.sent += len(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_POST = do_GET

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/results.jsonl"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def line(key: str, pad: int = 0) -> bytes:
    body = {"id": "c", "object": "chat.completion", "model": "m", "pad": " " * pad,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}]}
    return json.dumps({"custom_id": key, "response": {"status_code": 200, "body": body}}).encode() + b"\n"


def read(server: FileServer, caps: FileCaps) -> list[dict]:
    return asyncio.run(_read_results(server.url, {}, "batch b: its results could not be read", caps, KEYS,
                                     _openai_line))


def test_a_results_line_over_the_cap_is_its_requests_error():
    caps = FileCaps(line=64 * 1024, whole=8 * 1024 * 1024)

    def body():
        yield line(KEYS[0])
        yield line(KEYS[1], pad=1024 * 1024)  # sent in pieces: only its start is kept
        yield line(KEYS[2])

    server = FileServer(body)
    try:
        rows = read(server, caps)
    finally:
        server.close()
    assert [r["key"] for r in rows] == KEYS[:3]
    assert "body" in rows[0] and "body" in rows[2]
    assert rows[1]["error"] == {"message": "reply larger than 8 MB"} and rows[1]["counts"] is True


def test_a_results_file_over_its_cap_is_not_read_whole():
    caps = FileCaps(line=64 * 1024, whole=2 * 1024 * 1024)

    def body():  # endless
        while True:
            yield line(KEYS[0]) * 100

    server = FileServer(body)
    try:
        with pytest.raises(BatchError, match=r"batch b: its results could not be read: the results file is larger "
                                             r"than 2 MB \(the reply cap for each request in the batch\): not read"):
            read(server, caps)
    finally:
        server.close()


def test_the_file_cap_grows_with_the_batch(monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_MAX_REPLY_MB", "1")
    batch = SubmittedBatch(id="b", keys=KEYS, submitted_at="2026-01-01T00:00:00+00:00")
    openai, vertex = file_caps(BATCH_APIS["openai"], batch), file_caps(BATCH_APIS["vertex_ai"], batch)
    assert openai.line == 1024 * 1024 + 64 * 1024 and openai.whole == openai.line * 4
    assert vertex.line > openai.line  # each of its lines repeats the request that was sent
    assert vertex.whole == openai.whole + BATCH_APIS["vertex_ai"].max_bytes


@pytest.mark.parametrize("status", [302, 307, 308])
def test_a_batch_apis_redirect_is_not_followed(status):
    with Listener() as elsewhere:
        target = f"http://127.0.0.1:{elsewhere.port}/elsewhere"
        server = FileServer(redirect_to=target, status=status)
        try:
            with pytest.raises(BatchError, match=f"the batch was not accepted: HTTP {status} redirect to '{target}' "
                                                 "not followed: model API calls never follow redirects"):
                asyncio.run(_send("POST", server.url, {}, "the batch was not accepted", payload={"requests": []}))
            with pytest.raises(BatchError, match=f"HTTP {status} redirect to '{target}' not followed"):
                read(server, FileCaps(64 * 1024, 1024 * 1024))
        finally:
            server.close()
        assert elsewhere.everything() == []


class RedirectingBatchServer(BatchServer):
    """OpenAI's Files API that answers the upload with a redirect elsewhere."""

    def __init__(self, target: str) -> None:
        super().__init__()
        handler = self.httpd.RequestHandlerClass
        plain_post = handler.do_POST

        def do_POST(h):
            if h.path.endswith("/files"):
                h.rfile.read(int(h.headers["Content-Length"]))
                h.send_response(307)
                h.send_header("Location", target)
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            plain_post(h)

        handler.do_POST = do_POST


def test_an_openai_batch_upload_is_not_redirected(tmp_path):
    """Through litellm and the OpenAI SDK's files client: the upload of every request (frames
    included) is answered 307 to another listener, which receives nothing."""
    items = write_items(tmp_path)
    with Listener() as elsewhere:
        with RedirectingBatchServer(f"http://127.0.0.1:{elsewhere.port}/v1/files") as server:
            done = grade(items, tmp_path / "verdicts.jsonl", judges_file(tmp_path, server.base))
        assert done.returncode != 0
        assert "HTTP 307 redirect to" in done.stderr and "not followed" in done.stderr, done.stderr[-2000:]
        assert elsewhere.everything() == []


def test_an_openai_results_file_over_the_cap_is_not_read(tmp_path, monkeypatch):
    """The run's results file is bigger than the cap for its six requests: refused as it is read, the
    batch left to collect again."""
    items = write_items(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    with BatchServer() as server:
        judges = judges_file(tmp_path, server.base)
        assert grade(items, out, judges).returncode == 0
        server.finish("batch_1", lambda line: {**_completion(), "pad": " " * (3 * 1024 * 1024)})
        monkeypatch.setenv("FRAMEJUDGE_MAX_REPLY_MB", "0.1")  # 6 requests: about 1 MB in all
        done = grade(items, out, judges)
    assert done.returncode != 0
    assert "the results file is larger than" in done.stderr, done.stderr[-2000:]


def _completion() -> dict:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "batch-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
