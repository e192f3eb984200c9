"""What a key may keep in the upload folder: identical content stored once per key, a quota of bytes
and of videos per key, and a retention setting (uploads and cached frames removed after N days,
verdicts kept). The real app on a real SQLite file and a real PostgreSQL database, real clips."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from typer.testing import CliRunner

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for
from framejudge.service.uploads import Upload
from tests.service.test_jobs import auth, wait_done

TURN = {"question": "What number?", "golden": "10", "response_a": "It shows 10.", "response_b": "I cannot answer that."}
PAD = 3 * 1024**2  # each upload: the clip and 3 MiB of zeros after it, as a client padding a file would send


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    write_video(path, countdown, cfr_times(2, 30), gop=30)
    return path.read_bytes()


def padded(clip: bytes, extra: int = 0) -> bytes:
    """The clip padded with zeros: a video FFmpeg reads, of another size (and sha256) for each `extra`."""
    return clip + bytes(PAD + extra)


@pytest.fixture()
def service(database_url, tmp_path):
    engine = engine_for(database_url)
    keys = create_key(engine, ["grade"]), create_key(engine, ["grade"])

    def make(**overrides) -> tuple[TestClient, Settings]:
        settings = Settings(**{"database_url": database_url, "upload_dir": tmp_path / "uploads", "run_worker": False,
                               **overrides})
        return TestClient(create_app(settings)), settings

    return make, keys, engine


def stored(settings: Settings) -> list[str]:
    return sorted(p.name for p in settings.upload_dir.iterdir())


def upload(client: TestClient, key: str, content: bytes, name: str = "clip.mp4"):
    return client.post("/v1/videos", files={"file": (name, content, "video/mp4")}, headers=auth(key))


def test_identical_content_is_stored_once_per_key(service, clip):
    make, (key, other), _ = service
    client, settings = make()
    content = padded(clip)
    with client:
        answers = [upload(client, key, content, f"copy{k}.mp4") for k in range(3)]
        assert [a.status_code for a in answers] == [201, 200, 200], [a.text for a in answers]
        videos = [a.json()["videos"][0] for a in answers]
        assert len({v["id"] for v in videos}) == 1  # the first upload's id, each time
        assert [v["duplicate"] for v in videos] == [False, True, True]
        assert {v["sha256"] for v in videos} == {hashlib.sha256(content).hexdigest()}
        assert [v["filename"] for v in videos] == ["copy0.mp4", "copy1.mp4", "copy2.mp4"]  # as each request named it
        assert all(v["video"]["frame_count"] == 60 for v in videos)
        assert stored(settings) == [videos[0]["id"].removeprefix("upload:") + ".video"]  # stored once
        listed = client.get("/v1/videos", headers=auth(key)).json()["videos"]
        assert [v["id"] for v in listed] == [videos[0]["id"]]

        # another key's identical upload is its own (a key never gets another key's upload)
        theirs = upload(client, other, content)
        assert theirs.status_code == 201 and theirs.json()["videos"][0]["id"] != videos[0]["id"]
        assert len(stored(settings)) == 2

        # two identical parts in one request: stored once, 201 (one was new)
        both = client.post("/v1/videos", headers=auth(key), files=[
            ("file", ("a.mp4", padded(clip, 1), "video/mp4")), ("file", ("b.mp4", padded(clip, 1), "video/mp4"))])
        assert both.status_code == 201, both.text
        first, second = both.json()["videos"]
        assert first["id"] == second["id"] and (first["duplicate"], second["duplicate"]) == (False, True)
        assert len(stored(settings)) == 3


def test_a_refused_job_keeps_the_upload_its_content_was_already_stored_as(service, clip):
    """A job's video that this key already kept is that upload; refusing the job (all or nothing)
    forgets what the request stored, never the upload it was answered with."""
    make, (key, _), _ = service
    client, settings = make()
    with client:
        kept = upload(client, key, padded(clip)).json()["videos"][0]["id"]
        refused = client.post("/v1/jobs", headers=auth(key), data={"items": '{"id": "j", "video": "v.mp4", '
                                                                            '"turns": [{"question": 1}]}'},
                              files={"video": ("v.mp4", padded(clip), "video/mp4")})
        assert refused.status_code == 422, refused.text
        assert stored(settings) == [kept.removeprefix("upload:") + ".video"]
        job = client.post("/v1/jobs", headers=auth(key), data={"items": f'{{"id": "j", "video": "v.mp4", '
                                                                         f'"turns": [{json.dumps(TURN)}]}}'},
                          files={"video": ("v.mp4", padded(clip), "video/mp4")})
        assert job.status_code == 202, job.text
        assert stored(settings) == [kept.removeprefix("upload:") + ".video"]
        assert client.get("/v1/videos", headers=auth(key)).json()["videos"][0]["id"] == kept


def test_a_key_keeps_at_most_its_quota_of_bytes(service, clip):
    make, (key, other), _ = service
    size = len(padded(clip))
    client, settings = make(upload_quota_mb=2.5 * size / 1024**2)  # room for two of these videos
    with client:
        assert upload(client, key, padded(clip, 1)).status_code == 201
        assert upload(client, key, padded(clip, 2)).status_code == 201
        refused = upload(client, key, padded(clip, 3), "third.mp4")
        assert refused.status_code == 413, refused.text
        detail = refused.json()["detail"]
        assert detail.startswith("third.mp4: this API key's videos would take over") and "FRAMEJUDGE_UPLOAD_QUOTA_MB" in detail
        assert f"over {2.5 * size / 1024**2:,.1f} MiB" in detail and f"{2 * size / 1024**2 + 3 / 1024**2:,.1f} MiB kept now" in detail
        assert len(stored(settings)) == 2  # the refused one's file is gone
        # content the key already keeps costs nothing: still answered at the quota
        again = upload(client, key, padded(clip, 2))
        assert again.status_code == 200 and again.json()["videos"][0]["duplicate"] is True
        # the quota is per key
        assert upload(client, other, padded(clip, 3)).status_code == 201
        # room again once one is deleted
        first = client.get("/v1/videos", headers=auth(key)).json()["videos"][-1]["id"]
        assert client.delete(f"/v1/videos/{first}", headers=auth(key)).status_code == 204
        assert upload(client, key, padded(clip, 3)).status_code == 201


def test_a_key_keeps_at_most_its_quota_of_videos(service, clip):
    make, (key, _), _ = service
    client, settings = make(upload_quota_files=2)
    with client:
        assert upload(client, key, padded(clip, 1)).status_code == 201
        # a request of two new videos where one more fits: all or nothing
        refused = client.post("/v1/videos", headers=auth(key), files=[
            ("file", ("a.mp4", padded(clip, 2), "video/mp4")), ("file", ("b.mp4", padded(clip, 3), "video/mp4"))])
        assert refused.status_code == 413, refused.text
        assert "(2, FRAMEJUDGE_UPLOAD_QUOTA_FILES)" in refused.json()["detail"]
        assert len(stored(settings)) == 1
        assert upload(client, key, padded(clip, 2)).status_code == 201
        assert upload(client, key, padded(clip, 3)).status_code == 413
        assert upload(client, key, padded(clip, 1)).status_code == 200  # kept already: not one more


def test_quota_settings_come_from_the_environment(monkeypatch):
    from framejudge.service.settings import SettingsError

    monkeypatch.setenv("FRAMEJUDGE_UPLOAD_QUOTA_MB", "100")
    monkeypatch.setenv("FRAMEJUDGE_UPLOAD_QUOTA_FILES", "7")
    monkeypatch.setenv("FRAMEJUDGE_UPLOAD_RETENTION_DAYS", "30")
    settings = Settings.from_env()
    assert (settings.upload_quota_mb, settings.upload_quota_files, settings.upload_retention_days) == (100, 7, 30)
    for var, value in (("FRAMEJUDGE_UPLOAD_QUOTA_FILES", "0"), ("FRAMEJUDGE_UPLOAD_RETENTION_DAYS", "-1"),
                       ("FRAMEJUDGE_UPLOAD_QUOTA_MB", "nan")):
        monkeypatch.setenv(var, value)
        with pytest.raises(SettingsError, match=var):
            Settings.from_env()
        monkeypatch.delenv(var)


def test_retention_removes_old_uploads_and_cached_frames_and_keeps_verdicts(service, clip, tmp_path, monkeypatch):
    """`uploads prune` with FRAMEJUDGE_UPLOAD_RETENTION_DAYS: an old upload no job needs and old
    cached frames go, reported by count and size; a job's verdicts stay readable."""
    from framejudge.cli import app as cli

    make, (key, _), engine = service
    cache = tmp_path / "cache"
    monkeypatch.setenv("FRAMEJUDGE_CACHE_DIR", str(cache))
    client, settings = make(run_worker=True)
    with client:
        ids = [upload(client, key, padded(clip, k)).json()["videos"][0]["id"] for k in range(2)]
        job = client.post("/v1/jobs", headers=auth(key), json=[{"id": "r", "video": ids[0], "turns": [TURN]}]).json()
        assert wait_done(client, job["id"], key)["done"] == 1
        records = client.get(f"/v1/jobs/{job['id']}/verdicts", headers=auth(key)).json()["records"]
    from framejudge.frame_sampler.cache import FrameCache

    frames = FrameCache(cache / "frames")
    cached = frames.count()
    frames.close()
    assert cached >= 1  # the job's decode cached its frames
    with engine.begin() as conn:  # both uploads are ten days old
        conn.execute(update(Upload).values(created_at=datetime.now(timezone.utc) - timedelta(days=10)))
    env = {"FRAMEJUDGE_SERVICE_DB": settings.database_url, "FRAMEJUDGE_UPLOAD_DIR": str(settings.upload_dir),
           "FRAMEJUDGE_CACHE_DIR": str(cache)}
    kept = CliRunner().invoke(cli, ["uploads", "prune"], env={**env, "FRAMEJUDGE_UPLOAD_RETENTION_DAYS": "30"})
    assert kept.exit_code == 0, kept.output
    assert kept.output.startswith("deleted 0 upload(s), 0.0 MiB; removed 0 cached frame sampling(s), 0.0 MiB "
                                  "(older than 30 days)"), kept.output
    assert len(stored(settings)) == 2
    with sqlite3.connect(cache / "frames" / "cache.db") as db:  # the cached frames, ten days old too
        db.execute("UPDATE Cache SET store_time = store_time - ?", (10 * 86400,))
    done = CliRunner().invoke(cli, ["uploads", "prune"], env={**env, "FRAMEJUDGE_UPLOAD_RETENTION_DAYS": "7"})
    assert done.exit_code == 0, done.output
    size = len(padded(clip, 0)) + len(padded(clip, 1))
    assert done.output.startswith(f"deleted 2 upload(s), {size / 1024**2:.1f} MiB; removed {cached} cached frame "
                                  "sampling(s)"), done.output
    assert stored(settings) == []
    frames = FrameCache(cache / "frames")
    assert frames.count() == 0
    frames.close()
    with make()[0] as client:  # the verdicts are kept
        again = client.get(f"/v1/jobs/{job['id']}/verdicts", headers=auth(key)).json()["records"]
    assert again == records and again[0]["record"] == "verdict"


def test_the_server_applies_its_retention_setting(service, clip):
    """With FRAMEJUDGE_UPLOAD_RETENTION_DAYS the server removes old uploads itself (at start, then
    once an hour); one that an unfinished job names is kept; without it nothing is removed."""
    make, (key, _), engine = service
    client, settings = make()
    with client:
        ids = [upload(client, key, padded(clip, k)).json()["videos"][0]["id"] for k in range(2)]
        assert client.post("/v1/jobs", headers=auth(key), json=[{"id": "w", "video": ids[1], "turns": [TURN]}]
                           ).status_code == 202  # no worker: it stays unfinished
    with engine.begin() as conn:
        conn.execute(update(Upload).values(created_at=datetime.now(timezone.utc) - timedelta(days=10)))
    client, _ = make()
    with client:  # no retention setting: kept
        assert client.app.state.service.retained == []
    assert len(stored(settings)) == 2
    client, _ = make(upload_retention_days=7)
    with client:
        service = client.app.state.service
        for _ in range(600):  # its first pass runs as the server starts (each wait below is a request)
            if service.retained:
                break
            client.get("/healthz")
        [pruned] = service.retained
    assert [u.id for u in pruned.deleted] == [ids[0].removeprefix("upload:")]
    assert [u.id for u in pruned.kept] == [ids[1].removeprefix("upload:")]
    assert stored(settings) == [ids[1].removeprefix("upload:") + ".video"]
