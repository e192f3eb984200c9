"""Requests an attacker or a careless client sends: each is refused with a 4xx that says why
(never a 500, never a vague parse error), and none silently does what the CLI would refuse.
Against the real app and a real SQLite file."""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from fastapi.testclient import TestClient

from framejudge.service.app import create_app
from framejudge.service.settings import Settings, SettingsError
from framejudge.service.store import create_key, engine_for
from tests.service.servers import uvicorn_server
from tests.service.test_validation import ITEM, LABEL, TURN, api_client

@pytest.fixture()
def api(tmp_path):
    with api_client(tmp_path, raise_server_exceptions=False) as client:  # a 500 is an answer to look at
        yield client


def problem(r, status: int) -> str:
    assert r.status_code == status and r.headers["content-type"] == "application/problem+json", r.text[:300]
    return r.json()["detail"]


@pytest.mark.parametrize("path", ["/v1/videos", "/v1/jobs"])
def test_an_overlong_multipart_boundary_is_a_400(api, tmp_path, path):
    boundary = "B" * 100_000
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"items\"\r\n\r\n{json.dumps([ITEM])}\r\n"
            f"--{boundary}--\r\n").encode()
    r = api.post(path, content=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert problem(r, 400) == "the multipart boundary is 100000 characters; at most 256 (RFC 2046 allows 70)"
    assert not [p for p in (tmp_path / "uploads").iterdir()]


@pytest.mark.parametrize("path", ["/v1/grade", "/v1/frames", "/v1/calibrate", "/v1/jobs"])
@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 5000 + b"1" + b"}" * 5000])
def test_bodies_nested_too_deeply_say_so_on_every_route(api, path, body):
    r = api.post(path, content=body, headers={"Content-Type": "application/json"})
    assert "nested too deeply" in problem(r, 422)


@pytest.mark.parametrize("path, body", [("/v1/grade", {"item": ITEM}), ("/v1/frames", {"video": "c.mp4"}),
                                        ("/v1/calibrate", {"labels": [LABEL], "verdicts": []})])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_json_body_sent_as_another_type_names_the_type(api, path, body, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    r = api.post(path, content=json.dumps(body).encode(), headers=headers)
    assert problem(r, 415) == f"body: send it as application/json (got {content_type or 'no Content-Type'})"
    # still JSON when a charset or a +json type says so
    ok = api.post(path, content=json.dumps(body).encode(), headers={"Content-Type": "application/json; charset=utf-8"})
    assert ok.status_code != 415


@pytest.mark.parametrize("options, words", [
    ({"samples": 5}, "options.samples 5: the reference judge is deterministic, so every sample would be the same"),
])
def test_options_that_do_nothing_for_the_judge_are_refused_as_the_cli_does(api, options, words):
    r = api.post("/v1/grade", json={"item": ITEM, "options": options})
    assert problem(r, 422).startswith(words)
    r = api.post("/v1/jobs", json={"items": [ITEM], "options": options})
    assert problem(r, 422).startswith(words)
    assert api.post("/v1/grade", json={"item": ITEM, "options": {"samples": 1, "blind": False}}).status_code == 200
    # the reference judge reads the frames of questions about on-screen text, so a blind control means something
    assert api.post("/v1/grade", json={"item": ITEM, "options": {"blind": True}}).status_code == 200


def test_calibrate_refuses_labels_that_match_no_verdict_as_the_cli_does(api):
    verdicts = api.post("/v1/grade", json={"item": ITEM}).json()["records"]
    for label in ({**LABEL, "turn": 10**40}, {**LABEL, "turn": 3}, {**LABEL, "item_id": "other"}):
        r = api.post("/v1/calibrate", json={"labels": [label], "verdicts": verdicts, "replicates": 10})
        detail = problem(r, 422)
        assert detail.startswith("labels: none of the 1 labelled turn(s) has a verdict in the verdicts"), detail
        assert repr(label["item_id"]) in detail
    # one label that matches is enough (the others count toward the human ceiling)
    r = api.post("/v1/calibrate", json={"labels": [LABEL, {**LABEL, "turn": 3}], "verdicts": verdicts,
                                        "replicates": 10})
    assert r.status_code == 200, r.text[:300]


@pytest.mark.parametrize("video", ["", "   "])
def test_frames_of_an_empty_video_reference_are_refused(api, video):
    detail = problem(api.post("/v1/frames", json={"video": video}), 422)
    assert detail.startswith("video: video is empty")


def test_frames_errors_name_the_video_asked_for(api):
    assert problem(api.post("/v1/frames", json={"video": "gone.mp4"}), 404) == "gone.mp4: file not found"
    detail = problem(api.post("/v1/frames", json={"video": "c.mp4", "sampler": {"n": 1, "stream": 5}}), 422)
    assert detail.startswith("c.mp4: video stream 5 requested")


@pytest.fixture()
def redirector():
    """A loopback server whose every answer is a redirect without a Location."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_video_urls_with_ports_out_of_range_or_redirects_without_a_location_are_4xx(tmp_path, redirector):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                        run_worker=False, url_hosts=[f"127.0.0.1:{redirector}"], url_allow_private=True)
    key = create_key(engine_for(settings.database_url), ["grade"])
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {key}"
        for port in (0, 65536, 99999, 10**20):
            url = f"http://127.0.0.1:{port}/clip.mp4"
            for r in (client.post("/v1/frames", json={"video": url}),
                      client.post("/v1/grade", json={"item": {**ITEM, "video": url}})):
                assert problem(r, 400) == f"{url!r}: port {port} is not 1 to 65535"
        r = client.post("/v1/frames", json={"video": f"http://127.0.0.1:{redirector}/x.mp4"})
        assert problem(r, 422) == "127.0.0.1 answered HTTP 302 without a Location"
    assert list((tmp_path / "uploads").iterdir()) == []


def test_a_calibration_too_large_to_compute_in_a_request_is_refused_before_any_work(tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                        run_worker=False, max_calibration_draws=100)
    key = create_key(engine_for(settings.database_url), ["grade", "calibrate"])
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {key}"
        two = {"id": "a", "task_type": "multi_turn", "turns": [{**TURN, "time": 1.0}, {**TURN, "time": 2.0}]}
        verdicts = client.post("/v1/grade", json={"item": two}).json()["records"]
        labels = [{**LABEL, "turn": t, "annotator": a} for t in (0, 1) for a in ("h1", "h2")]
        r = client.post("/v1/calibrate", json={"labels": labels, "verdicts": verdicts})  # default 1000 replicates
        assert problem(r, 422) == ("2 labelled turn(s) x 1000 replicates is 2,000 bootstrap draws; this server "
                                   "computes at most 100 per request (FRAMEJUDGE_MAX_CALIBRATION_DRAWS): ask for "
                                   "at most 50 replicates, or run framejudge calibrate")
        r = client.post("/v1/calibrate", json={"labels": labels, "verdicts": verdicts, "replicates": 50})
        assert r.status_code == 200, r.text[:300]


def test_the_calibration_bound_is_a_setting(monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_MAX_CALIBRATION_DRAWS", "5000")
    assert Settings.from_env().max_calibration_draws == 5000
    assert Settings().max_calibration_draws == 1_000_000


def test_options_are_checked_against_the_judge_without_making_it(tmp_path):
    missing = f"transformers:{tmp_path / 'no-such-model'}"  # making it would fail
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                        run_worker=False, judges=["reference", missing])
    key = create_key(engine_for(settings.database_url), ["grade"])
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {key}"
        r = client.post(f"/v1/jobs?judge={missing}", json={"items": [ITEM], "options": {"samples": 3}})
        assert r.status_code == 202, r.text[:300]  # its k samples are drawn at a temperature
        r = client.post(f"/v1/jobs?judge={missing}", json={"items": [ITEM], "options": {"sample_temperature": 0}})
        assert "sample_temperature" in r.text and r.status_code == 422, r.text[:300]
        r = client.post(f"/v1/jobs?judge={missing}", json={"items": [ITEM], "options": {"blind": True}})
        assert r.status_code == 202, r.text[:300]  # it sees frames: a blind control means something


def _stalled(base: str, head: str, sent: bytes) -> bytes:
    """Send a request's headers and the start of its body, then nothing: the server's answer."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(head.encode() + b"\r\n" + sent)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


@pytest.mark.parametrize("path, kind, chunked", [
    ("/v1/grade", "application/json", False), ("/v1/grade", "application/json", True),
    ("/v1/jobs", "application/x-ndjson", False), ("/v1/videos", "multipart/form-data; boundary=B", False),
])
def test_a_body_that_stops_arriving_is_a_408_not_a_request_held_open(tmp_path, path, kind, chunked):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                        run_worker=False, body_timeout_s=0.5)
    key = create_key(engine_for(settings.database_url), ["grade"])
    length = "Transfer-Encoding: chunked" if chunked else "Content-Length: 100000"
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nContent-Type: {kind}\r\n"
            f"{length}\r\n")
    start = b"5\r\n[{\"a\"\r\n" if chunked else b'--B\r\nContent-Disposition: form-data; name="f"; filename="a.mp4"\r\n\r\nxx'
    with uvicorn_server(create_app(settings)) as base:
        answer = _stalled(base, head, start)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
        assert b"application/problem+json" in answer
        # a body that arrives in time is read as before
        ok = httpx.get(f"{base}/healthz")
        assert ok.status_code == 200
    uploads = tmp_path / "uploads"
    assert not uploads.exists() or not any(uploads.iterdir())  # a stalled upload leaves nothing behind


def test_the_body_timeout_is_a_setting(monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_BODY_TIMEOUT", "5")
    assert Settings.from_env().body_timeout_s == 5
    monkeypatch.setenv("FRAMEJUDGE_BODY_TIMEOUT", "0")
    with pytest.raises(SettingsError, match="FRAMEJUDGE_BODY_TIMEOUT: Input should be greater than 0"):
        Settings.from_env()
