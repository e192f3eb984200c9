"""A job's videos and the job's own lifetime: what a multipart job may name, what a failed
submission leaves behind, when an upload can be deleted, and what deleting a job means.
Against the real app, a real SQLite file and a real HTTP server on loopback."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from tests.service.test_jobs import auth, wait_done
from tests.service.test_media import TURN, VideoServer, leftovers, make


@pytest.fixture()
def media(tmp_path):
    """A media root holding clip.mp4: a name that an upload-less fallback would find."""
    root = tmp_path / "media"
    root.mkdir()
    write_video(root / "clip.mp4", countdown, cfr_times(2, 30), gop=30)
    return root


def video_part(path, name=None, field="video"):
    return (field, (name or path.name, path.read_bytes(), "video/mp4"))


def items_part(*items):
    return ("items", (None, "\n".join(json.dumps(it) for it in items)))


@pytest.mark.parametrize("parts, status, detail", [
    # an item names a file that was not uploaded (the media root has one by that name)
    (lambda c: [items_part({"id": "a", "video": "clip.mp4", "turns": [TURN]}), video_part(c, "other.mp4")],
     422, "item 0 names video 'clip.mp4', which is not among the uploaded files (other.mp4)"),
    # a video uploaded that no item names
    (lambda c: [items_part({"id": "a", "video": "clip.mp4", "turns": [TURN]}), video_part(c, "clip.mp4"),
                video_part(c, "spare.mp4")],
     422, "uploaded video 'spare.mp4' is named by no item"),
    (lambda c: [items_part({"id": "a", "video": "clip.mp4", "turns": [TURN]}), video_part(c), video_part(c)],
     422, "two uploaded videos are named 'clip.mp4': items could not say which they mean"),
    (lambda c: [items_part({"id": "a", "turns": [TURN]}), items_part({"id": "b", "turns": [TURN]})],
     422, "form field 'items' is given twice"),
    (lambda c: [items_part({"id": "a", "turns": [TURN]}), ("options", (None, "{}")), ("options", (None, "{}"))],
     422, "form field 'options' is given twice"),
    (lambda c: [items_part({"id": "a", "video": "clip.mp4", "turns": [TURN]}), video_part(c, field="file")],
     422, "unknown multipart part(s): file (items, options, and video files)"),
])
def test_multipart_jobs_refuse_what_they_cannot_mean_and_keep_nothing(tmp_path, media, parts, status, detail):
    app, settings, key, _ = make(tmp_path, run_worker=False, media_root=media)
    with TestClient(app) as client:
        r = client.post("/v1/jobs", files=parts(media / "clip.mp4"), headers=auth(key))
        assert r.status_code == status and r.headers["content-type"] == "application/problem+json", r.text
        assert r.json()["detail"] == detail
        assert leftovers(settings) == []  # the request's uploads went with it


def test_multipart_job_may_still_name_uploads_and_urls_by_reference(tmp_path, media):
    app, settings, key, _ = make(tmp_path, run_worker=False, media_root=media)
    with TestClient(app) as client:
        upload = client.post("/v1/videos", files=[video_part(media / "clip.mp4", field="file")],
                             headers=auth(key)).json()["videos"][0]["id"]
        items = [{"id": "a", "video": "clip.mp4", "turns": [TURN]}, {"id": "b", "video": upload, "turns": [TURN]},
                 {"id": "c", "turns": [TURN]}]
        r = client.post("/v1/jobs", files=[items_part(*items), video_part(media / "clip.mp4")], headers=auth(key))
        assert r.status_code == 202, r.text


class Server(VideoServer):
    pass


@pytest.fixture()
def server(media):
    s = Server((media / "clip.mp4").read_bytes())
    yield s
    s.server.shutdown()
    s.server.server_close()


def test_a_job_whose_url_videos_partly_fail_keeps_none_of_them(tmp_path, server):
    app, settings, key, _ = make(tmp_path, run_worker=False, url_hosts=[f"127.0.0.1:{server.port}"], url_allow_private=True)
    items = [{"id": "a", "video": server.url("/clip.mp4"), "turns": [TURN]},
             {"id": "b", "video": server.url("/page.mp4"), "turns": [TURN]}]
    with TestClient(app) as client:
        r = client.post("/v1/jobs", json=items, headers=auth(key))
        assert r.status_code == 415 and "page.mp4" in r.json()["detail"], r.text
        assert server.hosts  # the first was fetched ...
        assert leftovers(settings) == []  # ... and not kept for a job that does not exist
        r = client.post("/v1/jobs", json=items[:1], headers=auth(key))
        assert r.status_code == 202 and len(leftovers(settings)) == 1  # a job that exists keeps its video


def test_an_upload_a_waiting_job_needs_cannot_be_deleted(tmp_path, media):
    app, settings, key, _ = make(tmp_path, run_worker=False)
    with TestClient(app) as client:
        upload = client.post("/v1/videos", files=[video_part(media / "clip.mp4", field="file")],
                             headers=auth(key)).json()["videos"][0]["id"]
        job = client.post("/v1/jobs", json=[{"id": "a", "video": upload, "turns": [TURN]}], headers=auth(key)).json()
        r = client.delete(f"/v1/videos/{upload}", headers=auth(key))
        assert r.status_code == 409 and r.headers["content-type"] == "application/problem+json", r.text
        assert r.json()["detail"] == (f"{upload} is needed by job {job['id']}, which has not finished; cancel the "
                                      "job (DELETE /v1/jobs/{id}) or wait for it")
        assert len(leftovers(settings)) == 1
        assert client.delete(f"/v1/jobs/{job['id']}", headers=auth(key)).json()["state"] == "cancelled"
        assert client.delete(f"/v1/videos/{upload}", headers=auth(key)).status_code == 204
        assert leftovers(settings) == []


def test_deleting_a_job_cancels_it_and_deleting_a_finished_one_removes_it(tmp_path):
    app, settings, key, other = make(tmp_path)
    with TestClient(app) as client:
        job = client.post("/v1/jobs", json=[{"id": "a", "turns": [TURN]}], headers=auth(key)).json()["id"]
        status = wait_done(client, job, key)
        assert status["state"] == "done" and status["done"] == 1
        assert client.delete(f"/v1/jobs/{job}", headers=auth(other)).status_code == 404
        r = client.delete(f"/v1/jobs/{job}", headers=auth(key))
        assert r.status_code == 204 and r.content == b""  # deleted, with its records; never "cancelled"
        assert client.get(f"/v1/jobs/{job}", headers=auth(key)).status_code == 404
        assert client.get(f"/v1/jobs/{job}/verdicts", headers=auth(key)).status_code == 404
        assert client.delete(f"/v1/jobs/{job}", headers=auth(key)).status_code == 404
    with TestClient(create_app_without_worker(settings)) as client:
        job = client.post("/v1/jobs", json=[{"id": "a", "turns": [TURN]}], headers=auth(key)).json()["id"]
        r = client.delete(f"/v1/jobs/{job}", headers=auth(key))  # waiting: cancelled, kept to be read
        assert r.status_code == 200 and r.json()["state"] == "cancelled" and r.json()["cancelled_items"] == 1
        assert client.get(f"/v1/jobs/{job}", headers=auth(key)).json()["state"] == "cancelled"
        assert client.delete(f"/v1/jobs/{job}", headers=auth(key)).status_code == 204  # then removed
        assert client.get(f"/v1/jobs/{job}", headers=auth(key)).status_code == 404


def create_app_without_worker(settings):
    from framejudge.service.app import create_app

    return create_app(settings.model_copy(update={"run_worker": False}))


def test_a_key_lists_its_own_videos_newest_first(tmp_path, media):
    app, settings, key, other = make(tmp_path, run_worker=False)
    with TestClient(app) as client:
        ids = [client.post("/v1/videos", files=[("file", (f"v{k}.mp4", (media / "clip.mp4").read_bytes() + bytes(k),
                                                          "video/mp4"))],  # three contents
                           headers=auth(key)).json()["videos"][0]["id"] for k in range(3)]
        listed = client.get("/v1/videos?limit=2", headers=auth(key))
        assert listed.status_code == 200, listed.text
        assert [v["id"] for v in listed.json()["videos"]] == ids[::-1][:2]
        last = client.get("/v1/videos?offset=2", headers=auth(key)).json()["videos"]
        assert [(v["id"], v["filename"], v["container"]) for v in last] == [(ids[0], "v0.mp4", "mp4/mov")]
        assert client.get("/v1/videos", headers=auth(other)).json()["videos"] == []
        assert client.delete(f"/v1/videos/{ids[1]}", headers=auth(key)).status_code == 204
        assert [v["id"] for v in client.get("/v1/videos", headers=auth(key)).json()["videos"]] == [ids[2], ids[0]]
        r = client.get("/v1/videos?limit=501", headers=auth(key))
        assert r.status_code == 422 and r.json()["detail"].startswith("query.limit:"), r.text
