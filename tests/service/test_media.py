"""Videos into the service: multipart uploads (limits, sniffing, generated names), uploads in jobs,
and URL inputs (allow-list, private addresses, redirects) against a real HTTP server on loopback."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fastapi.testclient import TestClient

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.schema import JudgeError
from framejudge.service.app import create_app
from framejudge.runner.worker import show_video_ref
from framejudge.net import public_address
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for
from framejudge.service.uploads import sniff_container
from tests.service.test_jobs import auth, wait_done

TURN = {"question": "What number?", "golden": "10", "response_a": "It shows 10.", "response_b": "I cannot answer that."}


@pytest.fixture()
def clip(tmp_path):
    path = tmp_path / "clip.mp4"
    write_video(path, countdown, cfr_times(2, 30), gop=30)
    return path


def make(tmp_path, **overrides):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", **overrides)
    app = create_app(settings)
    engine = engine_for(settings.database_url)
    return app, settings, create_key(engine, ["grade", "calibrate"]), create_key(engine, ["grade"])


def leftovers(settings) -> list[str]:
    return sorted(p.name for p in settings.upload_dir.iterdir())


def test_upload_then_grade_and_preview_by_id(tmp_path, clip):
    app, settings, key, other = make(tmp_path, run_worker=False)
    with TestClient(app) as client:
        r = client.post("/v1/videos", files={"file": ("../../etc/My clip?.mp4", clip.read_bytes(), "video/mp4")},
                        headers=auth(key))
        assert r.status_code == 201, r.text
        [video] = r.json()["videos"]
        assert video["id"].startswith("upload:") and video["filename"] == "My clip_.mp4"
        assert video["sha256"] == hashlib.sha256(clip.read_bytes()).hexdigest()
        assert video["bytes"] == clip.stat().st_size and video["container"] == "mp4/mov"
        assert video["video"]["frame_count"] == 60 and video["video"]["path"] == video["id"]
        # stored under a generated name, nothing of the client's name in it
        stored = leftovers(settings)
        assert stored == [video["id"].removeprefix("upload:") + ".video"]

        item = {"id": "u1", "video": video["id"], "turns": [TURN]}
        r = client.post("/v1/grade", json={"item": item}, headers=auth(key))
        assert r.status_code == 200, r.text
        [verdict] = r.json()["records"]
        assert verdict["preference"] == "A" and verdict["provenance"]["video"] == video["id"]

        r = client.post("/v1/frames", json={"video": video["id"], "sampler": {"n": 3}}, headers=auth(key))
        assert r.status_code == 200 and len(r.json()["frames"]) == 3
        assert r.json()["video"]["path"] == video["id"]

        # another key can neither use nor delete it
        r = client.post("/v1/grade", json={"item": item}, headers=auth(other))
        assert r.status_code == 404 and r.json()["title"] == "No such upload"
        assert client.delete(f"/v1/videos/{video['id']}", headers=auth(other)).status_code == 404
        # a job naming it: the upload stays until the job has graded it
        r = client.post("/v1/jobs", json=[item], headers=auth(key))
        job = r.json()["id"]
        assert client.delete(f"/v1/videos/{video['id']}", headers=auth(key)).status_code == 409
        assert leftovers(settings) == stored
    with TestClient(create_app(settings.model_copy(update={"run_worker": True}))) as client:  # now the worker runs
        wait_done(client, job, key)
        [verdict] = client.get(f"/v1/jobs/{job}/verdicts", headers=auth(key)).json()["records"]
        assert verdict["provenance"]["video"] == video["id"]
        assert client.delete(f"/v1/videos/{video['id']}", headers=auth(key)).status_code == 204
        assert leftovers(settings) == []
        r = client.post("/v1/grade", json={"item": item}, headers=auth(key))
        assert r.status_code == 404


def test_records_never_show_server_paths():
    server = "/var/lib/framejudge/uploads/ab12.video"
    error = JudgeError(item_id="a", kind="bad_input", message=f"{server}: file not found")
    show_video_ref([error], "upload:ab12", server)
    assert error.message == "upload:ab12: file not found"


def test_upload_over_the_size_limit_is_413_and_leaves_nothing(tmp_path, clip):
    app, settings, key, _ = make(tmp_path, max_upload_bytes=clip.stat().st_size - 1)
    with TestClient(app) as client:
        r = client.post("/v1/videos", files={"file": ("clip.mp4", clip.read_bytes(), "video/mp4")}, headers=auth(key))
        assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"
        assert r.json()["title"] == "Upload too large" and "clip.mp4" in r.json()["detail"]
        assert leftovers(settings) == []


@pytest.mark.parametrize("name, body", [
    ("page.mp4", b"<!DOCTYPE html><html><body>404 Not Found</body></html>" * 20),
    ("list.m3u8", b"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile:///etc/passwd\n" * 10),
    ("pic.mp4", b"\x89PNG\r\n\x1a\n" + bytes(1000)),
    ("tiny.mp4", b"\x00\x01"),
])
def test_non_video_uploads_are_415(tmp_path, name, body):
    app, settings, key, _ = make(tmp_path)
    with TestClient(app) as client:
        r = client.post("/v1/videos", files={"file": (name, body, "video/mp4")}, headers=auth(key))
        assert r.status_code == 415, r.text
        assert r.json()["title"] == "Not a video" and name in r.json()["detail"]
        assert leftovers(settings) == []


def test_a_container_signature_with_nothing_behind_it_is_refused(tmp_path, clip):
    app, settings, key, _ = make(tmp_path)
    fake = clip.read_bytes()[:64] + bytes(4096)  # starts like MP4, holds no playable stream
    with TestClient(app) as client:
        r = client.post("/v1/videos", files={"file": ("fake.mp4", fake, "video/mp4")}, headers=auth(key))
        assert r.status_code == 415 and r.json()["title"] == "Not a video", r.text
        assert "fake.mp4" in r.json()["detail"] and "not a readable media file" in r.json()["detail"]
        assert leftovers(settings) == []


def test_upload_request_shape_errors(tmp_path, clip):
    app, _, key, _ = make(tmp_path)
    with TestClient(app) as client:
        r = client.post("/v1/videos", content=clip.read_bytes(), headers={**auth(key), "Content-Type": "video/mp4"})
        assert r.status_code == 415 and r.json()["title"] == "Multipart expected"
        r = client.post("/v1/videos", content=b"x", headers={**auth(key), "Content-Type": "multipart/form-data"})
        assert r.status_code == 400 and "boundary" in r.json()["detail"]
        r = client.post("/v1/videos", data={"note": "no file"}, files={"other": ("", b"")}, headers=auth(key))
        assert r.status_code == 422 and r.json()["title"] == "No video"  # text parts only
        r = client.post("/v1/videos", files={"file": ("clip.mp4", clip.read_bytes(), "video/mp4")})
        assert r.status_code == 401


def test_json_bodies_over_the_limit_are_413_before_parsing(tmp_path):
    app, _, key, _ = make(tmp_path)
    with TestClient(app) as client:
        big = b'{"item": {"id": "x", "turns": [{"question": "' + b"a" * (65 * 1024**2) + b'"}]}}'
        r = client.post("/v1/grade", content=big, headers={**auth(key), "Content-Type": "application/json"})
        assert r.status_code == 413 and r.json()["title"] == "Body too large"


def test_multipart_job_with_uploaded_videos_then_calibrate_from_the_job(tmp_path, clip):
    app, settings, key, other = make(tmp_path)
    second = tmp_path / "second.mkv"
    write_video(second, countdown, cfr_times(1, 25), gop=25)
    items = [{"id": "j1", "video": "clip.mp4", "turns": [TURN]},
             {"id": "j2", "video": "second.mkv", "turns": [TURN]},
             {"id": "j3", "turns": [{**TURN, "response_b": "Ten."}]}]
    jsonl = "\n".join(json.dumps(it) for it in items)
    with TestClient(app) as client:
        r = client.post("/v1/jobs", data={"items": jsonl}, headers=auth(key), files=[
            ("video", ("clip.mp4", clip.read_bytes(), "video/mp4")),
            ("video", ("second.mkv", second.read_bytes(), "video/x-matroska"))])
        assert r.status_code == 202, r.text
        one = json.dumps(items[0])
        again = client.post("/v1/jobs", data={"items": one}, headers={**auth(key), "Idempotency-Key": "k1"}, files=[
            ("video", ("clip.mp4", clip.read_bytes(), "video/mp4"))])
        stored = len(leftovers(settings))
        repeat = client.post("/v1/jobs", data={"items": one}, headers={**auth(key), "Idempotency-Key": "k1"}, files=[
            ("video", ("clip.mp4", clip.read_bytes(), "video/mp4"))])
        assert repeat.json()["id"] == again.json()["id"] and len(leftovers(settings)) == stored  # nothing re-stored
        client.delete(f"/v1/jobs/{again.json()['id']}", headers=auth(key))
        status = wait_done(client, r.json()["id"], key)
        assert status["done"] == 3 and status["judge_errors"] == 0
        records = client.get(f"/v1/jobs/{status['id']}/verdicts", headers=auth(key)).json()["records"]
        videos = [rec["provenance"]["video"] for rec in records]
        assert videos[0].startswith("upload:") and videos[1].startswith("upload:") and videos[2] is None

        labels = [{"item_id": it["id"], "turn": 0, "annotator": "h1", "preference": "A",
                   "category_a": "Successful", "category_b": "Error message"} for it in items]
        r = client.post("/v1/calibrate", json={"labels": labels, "job_id": status["id"], "replicates": 50},
                        headers=auth(key))
        assert r.status_code == 200, r.text
        assert r.json()["result"]["fields"]
        r = client.post("/v1/calibrate", json={"labels": labels, "job_id": status["id"]}, headers=auth(other))
        assert r.status_code == 403  # lacks the calibrate scope
        r = client.post("/v1/calibrate", json={"labels": labels}, headers=auth(key))
        assert r.status_code == 422 and "exactly one" in r.json()["detail"]

        # an items part is required, and a name no upload matches is refused, naming it
        r = client.post("/v1/jobs", data={"x": "1"}, files=[("video", ("clip.mp4", clip.read_bytes(), "video/mp4"))],
                        headers=auth(key))
        assert r.status_code == 422 and "items" in r.json()["detail"]
        r = client.post("/v1/jobs", data={"items": json.dumps([{"id": "z", "video": "missing.mp4", "turns": [TURN]}])},
                        files=[("video", ("clip.mp4", clip.read_bytes(), "video/mp4"))], headers=auth(key))
        assert r.status_code == 422 and "names video 'missing.mp4'" in r.json()["detail"]


# ----------------------------------------------------------------------------- URL inputs


class VideoServer:
    """A real HTTP server on loopback: a video, a page, and redirects."""

    def __init__(self, video: bytes) -> None:
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.hosts.append(self.headers.get("Host"))
                if self.path == "/clip.mp4":
                    self._send(200, video, "video/mp4")
                elif self.path == "/page.mp4":
                    self._send(200, b"<html>" + b" " * 1000 + b"</html>", "text/html")
                elif self.path == "/same-host":
                    self._redirect(f"http://127.0.0.1:{served.port}/clip.mp4")
                elif self.path == "/other-host":
                    self._redirect(f"http://localhost:{served.port}/clip.mp4")
                elif self.path == "/loop":
                    self._redirect("/loop")
                elif self.path == "/drip.mp4":
                    self._drip(video, "video/mp4")
                elif self.path.startswith("/late.mp4"):  # the whole video, after a pause (?k=... for distinct URLs)
                    time.sleep(0.6)
                    self._send(200, video, "video/mp4")
                else:
                    self._send(404, b"missing", "text/plain")

            def _send(self, code: int, body: bytes, kind: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _drip(self, body: bytes, kind: str) -> None:
                """The whole body, slowly: one fortieth every 0.2 s, each well within a read timeout."""
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                step = len(body) // 40 + 1
                try:
                    for start in range(0, len(body), step):
                        self.wfile.write(body[start:start + step])
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:  # the client gave up
                    pass

            def _redirect(self, where: str) -> None:
                self.send_response(302)
                self.send_header("Location", where)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.hosts: list[str | None] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture()
def server(clip):
    s = VideoServer(clip.read_bytes())
    yield s
    s.server.shutdown()
    s.server.server_close()


def grade_url(client, key, url):
    return client.post("/v1/grade", json={"item": {"id": "w", "video": url, "turns": [TURN]}}, headers=auth(key))


def test_urls_are_off_by_default(tmp_path, server):
    app, _, key, _ = make(tmp_path)
    with TestClient(app) as client:
        r = grade_url(client, key, server.url("/clip.mp4"))
        assert r.status_code == 400 and r.json()["title"] == "URL inputs disabled"
    assert server.hosts == []


@pytest.mark.parametrize("url_hosts", [[], ["127.0.0.1"]], ids=["urls off", "urls on"])
def test_object_storage_urls_are_400_with_the_reason(tmp_path, url_hosts):
    """Items sent to the service refer to uploads (or allowed http(s) URLs); s3:// and gs:// are for
    `framejudge grade`, and here a client error, for one item and for a job."""
    app, _, key, _ = make(tmp_path, url_hosts=url_hosts)
    with TestClient(app) as client:
        for url in ("s3://bucket/clip.mp4", "gs://bucket/clip.mp4"):
            for r in (grade_url(client, key, url),
                      client.post("/v1/jobs", json=[{"id": "w", "video": url, "turns": [TURN]}], headers=auth(key))):
                assert r.status_code == 400 and r.json()["title"] == "Bad video URL", r.text
                assert "reads no object storage" in r.json()["detail"]


def test_private_addresses_are_refused_even_for_listed_hosts(tmp_path, server):
    app, _, key, _ = make(tmp_path, url_hosts=[f"127.0.0.1:{server.port}", f"localhost:{server.port}"])
    with TestClient(app) as client:
        for host in ("127.0.0.1", "localhost"):
            r = grade_url(client, key, f"http://{host}:{server.port}/clip.mp4")
            assert r.status_code == 403 and r.json()["title"] == "Address not allowed", r.text
    assert server.hosts == []  # refused before any connection


def test_allow_listed_fetch_redirects_and_refusals(tmp_path, server):
    app, settings, key, _ = make(tmp_path, url_hosts=[f"127.0.0.1:{server.port}"], url_allow_private=True)
    with TestClient(app) as client:
        r = grade_url(client, key, server.url("/clip.mp4"))
        assert r.status_code == 200, r.text
        [verdict] = r.json()["records"]
        assert verdict["preference"] == "A" and verdict["provenance"]["video"] == server.url("/clip.mp4")
        assert server.hosts[-1] == f"127.0.0.1:{server.port}"

        r = grade_url(client, key, server.url("/same-host"))
        assert r.status_code == 200, r.text

        before = len(server.hosts)
        r = grade_url(client, key, server.url("/other-host"))
        assert r.status_code == 403 and r.json()["title"] == "Redirect not allowed", r.text
        assert r.json()["detail"].startswith("127.0.0.1 redirects to another origin (localhost)")
        assert len(server.hosts) == before + 1  # the redirect was not followed

        r = grade_url(client, key, f"http://localhost:{server.port}/clip.mp4")
        assert r.status_code == 403 and r.json()["title"] == "Host not allowed"
        r = grade_url(client, key, f"ftp://127.0.0.1:{server.port}/clip.mp4")
        assert r.status_code == 400 and r.json()["title"] == "Bad video URL"
        r = grade_url(client, key, server.url("/page.mp4"))
        assert r.status_code == 415 and r.json()["title"] == "Not a video"
        r = grade_url(client, key, server.url("/nothing"))
        assert r.status_code == 422 and "HTTP 404" in r.json()["detail"]
        r = grade_url(client, key, server.url("/loop"))
        assert r.status_code == 422 and "redirects" in r.json()["detail"]
    assert leftovers(settings) == []  # a video fetched for one request is not kept


@pytest.mark.parametrize("url", ["http://xn--/clip.mp4", "http://a..example.com/clip.mp4",
                                 f"http://{'a' * 64}.example.com/clip.mp4", "http://\x01.example.com/"])
def test_malformed_host_names_are_400(tmp_path, url):
    app, _, key, _ = make(tmp_path, url_hosts=["*.example.com", "xn--"])
    with TestClient(app) as client:
        r = grade_url(client, key, url)
        assert r.status_code == 400 and r.json()["title"] == "Bad video URL", r.text


def test_a_slow_url_fetch_stops_at_its_deadline(tmp_path, server, clip):
    app, settings, key, _ = make(tmp_path, url_hosts=[f"127.0.0.1:{server.port}"], url_allow_private=True, url_deadline_s=1)
    with TestClient(app) as client:
        r = grade_url(client, key, server.url("/drip.mp4"))
        assert r.status_code == 422 and r.json()["title"] == "Video URL too slow", r.text
        assert r.json()["detail"] == ("127.0.0.1: the download did not finish within 1 s "
                                      "(FRAMEJUDGE_URL_DEADLINE)")
        r = client.post("/v1/frames", json={"video": server.url("/drip.mp4")}, headers=auth(key))
        assert r.status_code == 422 and r.json()["title"] == "Video URL too slow"
        r = client.post("/v1/jobs", json=[{"id": "d", "video": server.url("/drip.mp4"), "turns": [TURN]}],
                        headers=auth(key))
        assert r.status_code == 422 and r.json()["title"] == "Video URL too slow"
    assert leftovers(settings) == []  # the partial download is gone


def test_the_urls_of_one_request_share_one_deadline(tmp_path, server, clip):
    """Four URLs that each arrive well within the deadline, but not all four together: the request
    is held for one FRAMEJUDGE_URL_DEADLINE, not one per URL."""
    app, settings, key, _ = make(tmp_path, url_hosts=[f"127.0.0.1:{server.port}"], url_allow_private=True, url_deadline_s=1.5,
                                 run_worker=False)
    items = [{"id": f"u{k}", "video": server.url(f"/late.mp4?k={k}"), "turns": [TURN]} for k in range(4)]
    with TestClient(app) as client:
        r = client.post("/v1/jobs", json=items, headers=auth(key))  # 4 x 0.6 s cannot fit in 1.5 s
        assert r.status_code == 422 and r.json()["title"] == "Video URL too slow", r.text
        assert r.json()["detail"] == ("127.0.0.1: the download did not finish within 1.5 s "
                                      "(FRAMEJUDGE_URL_DEADLINE, for all 4 video URLs of the request)")
        one = client.post("/v1/jobs", json=items[:1], headers=auth(key))  # one of them alone is in time
        assert one.status_code == 202, one.text
    assert len(leftovers(settings)) == 1  # the refused job kept none of the videos it fetched


def test_url_over_the_size_limit_is_413(tmp_path, server, clip):
    app, settings, key, _ = make(tmp_path, url_hosts=[f"127.0.0.1:{server.port}"], url_allow_private=True,
                                 max_upload_bytes=clip.stat().st_size // 2)
    with TestClient(app) as client:
        r = grade_url(client, key, server.url("/clip.mp4"))
        assert r.status_code == 413, r.text
    assert leftovers(settings) == []


@pytest.mark.parametrize("address, public", [
    ("8.8.8.8", True), ("2001:4860:4860::8888", True),
    ("127.0.0.1", False), ("10.1.2.3", False), ("172.16.0.1", False), ("192.168.1.1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False), ("224.0.0.1", False),
    ("::1", False), ("fd00::1", False), ("fe80::1%eth0", False), ("::ffff:127.0.0.1", False),
    ("::ffff:10.0.0.1", False), ("::ffff:8.8.8.8", True),
    # IPv4 carried inside IPv6: IPv4-compatible, IPv4-translated, NAT64, 6to4, Teredo, ISATAP
    ("::127.0.0.1", False), ("::8.8.8.8", False), ("::ffff:0:7f00:1", False), ("::ffff:0:808:808", False),
    ("64:ff9b::7f00:1", False), ("64:ff9b::a9fe:a9fe", False), ("64:ff9b::a00:1", False),
    ("64:ff9b::808:808", True), ("64:ff9b:1::a9fe:a9fe", False), ("64:ff9b:1::808:808", False),
    ("2002:7f00:1::1", False), ("2002:a9fe:a9fe::1", False), ("2002:a00:1::1", False), ("2002:808:808::1", True),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False), ("2001:0:808:808:0:f7f7:80ff:fffe", False),
    ("2001:4860:4860::5efe:7f00:1", False), ("2001:4860:4860:0:200:5efe:a9fe:a9fe", False),
    ("2001:4860:4860::5efe:808:808", True), ("fe80::5efe:808:808", False),
    # not global unicast, or not plainly so
    ("fec0::1", False), ("ff0e::1", False), ("100::1", False), ("2001:db8::1", False), ("::", False),
    ("5f00::1", False), ("3fff::1", False), ("not an address", False), ("", False),
])
def test_public_address_rule(address, public):
    assert public_address(address) is public


def test_ipv6_literals_carrying_loopback_are_refused_before_connecting(tmp_path, server):
    hosts = ["::127.0.0.1", "::ffff:0:7f00:1", "64:ff9b::7f00:1", "2002:7f00:1::1"]
    app, _, key, _ = make(tmp_path, url_hosts=[f"[{host}]:{server.port}" for host in hosts])
    with TestClient(app) as client:
        for host in hosts:
            r = grade_url(client, key, f"http://[{host}]:{server.port}/clip.mp4")
            assert r.status_code == 403 and r.json()["title"] == "Address not allowed", r.text
    assert server.hosts == []


def test_container_sniffing(clip, tmp_path):
    mkv = tmp_path / "c.mkv"
    write_video(mkv, countdown, cfr_times(1, 10), gop=10)
    assert sniff_container(clip.read_bytes()[:512]) == "mp4/mov"
    assert sniff_container(mkv.read_bytes()[:512]) == "matroska/webm"
    assert sniff_container(b"RIFF\x00\x00\x00\x00AVI LIST") == "avi"
    assert sniff_container(bytes([0x47]) + bytes(187) + bytes([0x47]) + bytes(187) + bytes([0x47]) + bytes(10)) == "mpeg-ts"
    assert sniff_container(b"#EXTM3U\n") is None and sniff_container(b"GIF89a") is None


def test_pruning_old_uploads_keeps_those_unfinished_jobs_name(tmp_path, clip):
    import os
    import subprocess
    import sys

    from sqlalchemy import update

    from framejudge.service.uploads import Upload

    app, settings, key, _ = make(tmp_path, run_worker=False)
    with TestClient(app) as client:
        ids = [client.post("/v1/videos", files={"file": (f"c{k}.mp4", clip.read_bytes() + bytes(k), "video/mp4")},
                           headers=auth(key)).json()["videos"][0]["id"] for k in range(3)]  # three contents
        r = client.post("/v1/jobs", json=[{"id": "p", "video": ids[0], "turns": [TURN]}], headers=auth(key))
        assert r.status_code == 202
    engine = engine_for(settings.database_url)
    with engine.begin() as conn:  # the first two are ten days old, the third is new
        conn.execute(update(Upload).where(Upload.id.in_([i.removeprefix("upload:") for i in ids[:2]]))
                     .values(created_at=datetime.now(timezone.utc) - timedelta(days=10)))
    env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": settings.database_url}
    done = subprocess.run([sys.executable, "-m", "framejudge.cli", "uploads", "prune", "--older-than-days", "7"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("deleted 1 upload(s)"), done.stderr
    left = leftovers(settings)
    assert ids[1].removeprefix("upload:") + ".video" not in left  # old and unused: gone
    assert ids[0].removeprefix("upload:") + ".video" in left  # old, but a pending job names it
    assert ids[2].removeprefix("upload:") + ".video" in left  # new


def test_uploads_are_not_reachable_as_media_root_paths(tmp_path, clip):
    media = tmp_path / "media"
    media.mkdir()
    app, settings, key, other = make(tmp_path, run_worker=False, media_root=media, upload_dir=media / "uploads")
    with TestClient(app) as client:
        r = client.post("/v1/videos", files={"file": ("clip.mp4", clip.read_bytes(), "video/mp4")}, headers=auth(key))
        stored = r.json()["videos"][0]["id"].removeprefix("upload:") + ".video"
        for path in (f"uploads/{stored}", str(media / "uploads" / stored), "uploads/nothing.video"):
            r = client.post("/v1/frames", json={"video": path}, headers=auth(other))
            assert r.status_code == 403 and r.json()["title"] == "Not a media path", r.text
            r = client.post("/v1/jobs", json=[{"id": "s", "video": path, "turns": [TURN]}], headers=auth(other))
            assert r.status_code == 403 and "upload:" in r.json()["detail"]


def test_a_host_without_a_port_allows_only_the_default_ports(tmp_path, server):
    """Allowing `127.0.0.1` (or `localhost`) does not allow every service on it: a listed host without a
    port is allowed on 80 and 443 only, `host:port` on that port only; refused before any connection."""
    app, _, key, _ = make(tmp_path, url_hosts=["127.0.0.1", "localhost", f"127.0.0.1:{server.port + 1}"],
                          url_allow_private=True)
    with TestClient(app) as client:
        for host in ("127.0.0.1", "localhost"):
            r = grade_url(client, key, f"http://{host}:{server.port}/clip.mp4")
            assert r.status_code == 403 and r.json()["title"] == "Host not allowed", r.text
            assert r.json()["detail"].startswith(f"host {host}:{server.port} is not on this server's allow-list")
    assert server.hosts == []
    app, _, key, _ = make(tmp_path / "with-port", url_hosts=[f"localhost:{server.port}"], url_allow_private=True)
    with TestClient(app) as client:
        assert grade_url(client, key, f"http://localhost:{server.port}/clip.mp4").status_code == 200
        r = grade_url(client, key, f"http://127.0.0.1:{server.port}/clip.mp4")  # another host, the same port
        assert r.status_code == 403 and r.json()["title"] == "Host not allowed", r.text


@pytest.mark.parametrize("entry, host, port, scheme, allowed", [
    ("media.example.com", "media.example.com", 443, "https", True),
    ("media.example.com", "media.example.com", 80, "http", True),
    ("media.example.com", "media.example.com", 8080, "http", False),
    ("media.example.com", "media.example.com", 80, "https", False),
    ("media.example.com:8080", "media.example.com", 8080, "http", True),
    ("media.example.com:8080", "media.example.com", 443, "https", False),
    ("*.example.com", "cdn.example.com", 443, "https", True),
    ("*.example.com", "example.com", 443, "https", False),
    ("*.example.com:9000", "a.b.example.com", 9000, "https", True),
    ("[::1]:8080", "::1", 8080, "http", True),
    ("::1", "0:0::1", 80, "http", True),
    ("::1", "::1", 8080, "http", False),
])
def test_allow_list_entries_name_a_port_or_mean_the_default_ones(entry, host, port, scheme, allowed):
    from framejudge import net

    assert net.host_allowed(host, port, scheme, net.host_rules([entry])) is allowed


def test_a_redirect_to_another_origin_is_not_followed_even_to_a_listed_host(tmp_path, server):
    app, _, key, _ = make(tmp_path, url_hosts=[f"127.0.0.1:{server.port}", f"localhost:{server.port}"],
                          url_allow_private=True)
    with TestClient(app) as client:
        r = grade_url(client, key, server.url("/other-host"))  # 127.0.0.1 -> localhost, both listed
        assert r.status_code == 403 and r.json()["title"] == "Redirect not allowed", r.text
        assert server.hosts == [f"127.0.0.1:{server.port}"]  # localhost was never asked
        assert grade_url(client, key, server.url("/same-host")).status_code == 200  # within its origin: followed
