"""The HTTP API against the real app (TestClient) and a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import framejudge.rubrics
from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for


@pytest.fixture()
def env(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    write_video(media / "c.mp4", countdown, cfr_times(2, 30), gop=30)
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=media, requests_per_minute=5)
    app = create_app(settings)
    engine = engine_for(settings.database_url)
    keys = {"grade": create_key(engine, ["grade"]), "calibrate": create_key(engine, ["calibrate"])}
    return TestClient(app), keys, tmp_path, media


def auth(key):
    return {"Authorization": f"Bearer {key}"}


ITEM = {"id": "a", "video": "c.mp4", "turns": [{"question": "What number?", "golden": "10",
                                                "response_a": "It shows 10.", "response_b": "I cannot answer that."}]}


def test_health_and_docs(env):
    client, keys, *_ = env
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}  # no judges, no endpoints without a key
    scraper = create_key(engine_for(client.app.state.service.settings.database_url), ["metrics"])
    ready = client.get("/readyz", headers=auth(scraper))
    assert ready.status_code == 200
    assert ready.json()["judges"] == [{"spec": "reference", "api_base": None, "endpoint": None}]
    assert client.get("/readyz", headers=auth(keys["grade"])).status_code == 403
    schema = client.get("/openapi.json").json()
    assert "/v1/grade" in schema["paths"] and any(k.startswith("Verdict") for k in schema["components"]["schemas"])
    assert client.get("/docs").status_code == 200


def test_readiness_checks_each_allowed_judge(tmp_path, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{dead}/v1")
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", judges=["reference", "litellm:openai/m"])
    scraper = create_key(engine_for(settings.database_url), ["metrics"])
    with TestClient(create_app(settings)) as client:
        anonymous = client.get("/readyz")
        r = client.get("/readyz", headers=auth(scraper))
    assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["detail"].startswith("litellm:openai/m: http://127.0.0.1:") and "does not answer" in r.json()["detail"]
    # without a key: not ready, and how many judges, but neither which nor where their servers are
    assert anonymous.status_code == 503 and anonymous.json()["detail"] == (
        "1 of 2 judge(s) cannot be called (a key with the metrics scope sees which and why)")
    assert str(dead) not in anonymous.text and "openai" not in anonymous.text


def test_grade_returns_the_library_verdicts(env):
    client, keys, *_ = env
    r = client.post("/v1/grade", json={"item": ITEM}, headers=auth(keys["grade"]))
    assert r.status_code == 200, r.text
    [v] = r.json()["records"]
    assert v["record"] == "verdict" and v["preference"] == "A"
    assert v["response_b"]["category"] == "Error message"
    assert v["provenance"]["judge_backend"] == "reference"


def test_auth_failures_are_problems(env):
    client, keys, *_ = env
    r = client.post("/v1/grade", json={"item": ITEM})
    assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["title"] == "Unauthorized" and "Bearer" in r.json()["detail"]
    r = client.get("/v1/rubrics", headers=auth("fj_000000000000_nope"))
    assert r.status_code == 401 and r.json()["detail"] == "unknown API key"
    r = client.get("/v1/rubrics", headers=auth(keys["calibrate"]))
    assert r.status_code == 403 and "'grade' scope" in r.json()["detail"]


def test_rate_limit_with_retry_after(env):
    client, keys, *_ = env
    codes = [client.get("/v1/rubrics", headers=auth(keys["grade"])).status_code for _ in range(7)]
    assert codes[:5] == [200] * 5 and codes[5] == 429
    r = client.get("/v1/rubrics", headers=auth(keys["grade"]))
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1


@pytest.mark.parametrize("video,status,title", [
    ("../secret.mp4", 400, "Bad video path"),
    ("/etc/passwd", 403, "Outside the media root"),
    ("https://example.com/x.mp4", 400, "URL inputs disabled"),
])
def test_path_traversal_is_refused(env, video, status, title):
    client, keys, *_ = env
    r = client.post("/v1/grade", json={"item": {**ITEM, "video": video}}, headers=auth(keys["grade"]))
    assert r.status_code == status and r.json()["title"] == title


def test_symlink_escape_is_refused(env):
    client, keys, tmp_path, media = env
    (tmp_path / "outside.mp4").write_bytes((media / "c.mp4").read_bytes())
    (media / "link.mp4").symlink_to(tmp_path / "outside.mp4")
    r = client.post("/v1/grade", json={"item": {**ITEM, "video": "link.mp4"}}, headers=auth(keys["grade"]))
    assert r.status_code == 403 and r.json()["title"] == "Outside the media root"


def test_bad_bodies_are_422_problems(env):
    client, keys, *_ = env
    r = client.post("/v1/grade", json={"item": {"id": "x", "turns": []}}, headers=auth(keys["grade"]))
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["detail"].startswith("item.turns:")
    r = client.post("/v1/grade", json={"item": ITEM, "judge": "litellm:gpt-4o"}, headers=auth(keys["grade"]))
    assert r.status_code == 400 and r.json()["title"] == "Judge not allowed"
    r = client.post("/v1/grade", json={"item": ITEM, "rubric": "nope"}, headers=auth(keys["grade"]))
    assert r.status_code == 400 and "no rubric with id 'nope'" in r.json()["detail"]
    assert client.get("/v1/nothing", headers=auth(keys["grade"])).status_code == 404


def test_unreadable_or_empty_videos_with_the_reference_judge(env):
    client, keys, tmp_path, media = env
    (media / "folder.mp4").mkdir()
    for video, reason in [("missing.mp4", "file not found"), ("folder.mp4", "is a directory")]:
        r = client.post("/v1/grade", json={"item": {**ITEM, "video": video}}, headers=auth(keys["grade"]))
        assert r.status_code == 200, r.text
        [e] = r.json()["records"]
        assert e["record"] == "judge_error" and e["kind"] == "bad_input" and reason in e["message"]
    for path in ("/v1/grade", "/v1/jobs"):
        body = {"item": {**ITEM, "video": ""}} if path == "/v1/grade" else [{**ITEM, "video": ""}]
        r = client.post(path, json=body, headers=auth(keys["grade"]))
        assert r.status_code == 422 and "video is empty" in r.json()["detail"], r.text


def test_rubrics(env):
    client, keys, *_ = env
    listed = client.get("/v1/rubrics", headers=auth(keys["grade"])).json()
    assert {r["id"] for r in listed} >= {"video-qa", "mcq-letter"}
    rubric = client.get("/v1/rubrics/video-qa", headers=auth(keys["grade"])).json()
    assert rubric["version"] == "1.1.0" and len(rubric["categories"]) == 5
    assert client.get("/v1/rubrics/nope", headers=auth(keys["grade"])).status_code == 404


def test_keys_are_stored_hashed(env):
    import sqlite3

    client, keys, tmp_path, _ = env
    secret = keys["grade"].split("_", 2)[2]
    rows = sqlite3.connect(tmp_path / "db.sqlite").execute("select secret_sha256, scopes from api_keys").fetchall()
    assert rows and all(secret not in r[0] for r in rows)
    assert sqlite3.connect(tmp_path / "db.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_cors_closed_by_default(env):
    client, keys, *_ = env
    r = client.options("/v1/rubrics", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in r.headers


def test_frames_preview(env):
    client, keys, *_ = env
    r = client.post("/v1/frames", json={"video": "c.mp4", "sampler": {"n": 3, "end_at": 1.5, "lookback": 1}},
                    headers=auth(keys["grade"]))
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["frames"]) == 3 and body["frames"][-1]["info"]["timestamp"] == 1.5
    assert body["frames"][0]["data_url"].startswith("data:image/jpeg;base64,")
    sheet = client.post("/v1/frames", json={"video": "c.mp4", "contact_sheet": True}, headers=auth(keys["grade"])).json()
    assert sheet["contact_sheet"].startswith("data:image/jpeg;base64,") and sheet["frames"] == []
    r = client.post("/v1/frames", json={"video": "missing.mp4"}, headers=auth(keys["grade"]))
    assert r.status_code == 404 and r.json()["detail"] == "missing.mp4: file not found"
    r = client.post("/v1/frames", json={"video": "c.mp4", "sampler": {"end_at": 99}}, headers=auth(keys["grade"]))
    assert r.status_code == 422 and "after the end of the clip" in r.json()["detail"]
    r = client.post("/v1/frames", json={"video": "c.mp4", "sampler": {"n": 0}}, headers=auth(keys["grade"]))
    assert r.status_code == 422 and "budget" in r.json()["detail"]


def test_decoding_runs_in_a_killable_process_with_a_time_limit(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    write_video(media / "hd.mp4", countdown, cfr_times(4, 30), size=(1920, 1080), gop=60)
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=media, decode_timeout_s=0.01)
    key = create_key(engine_for(settings.database_url), ["grade"])
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/frames", json={"video": "hd.mp4", "sampler": {"n": 16}}, headers=auth(key))
        assert r.status_code == 422 and "longer than 0.01 s" in r.json()["detail"], r.text
        assert client.get("/healthz").status_code == 200  # the server itself is untouched


def test_calibrate_and_report(env):
    client, keys, *_ = env
    graded = client.post("/v1/grade", json={"item": ITEM}, headers=auth(keys["grade"])).json()["records"]
    labels = [{"item_id": "a", "annotator": a, "category_a": "Successful", "category_b": "Error message",
               "preference": "A"} for a in ("x", "y")]
    body = {"labels": labels, "verdicts": graded, "replicates": 50}
    r = client.post("/v1/calibrate", json={**body, "seed": -1}, headers=auth(keys["calibrate"]))
    assert r.status_code == 422 and r.json()["detail"].startswith("seed")
    assert client.post("/v1/calibrate", json=body, headers=auth(keys["grade"])).status_code == 403
    r = client.post("/v1/calibrate", json=body, headers=auth(keys["calibrate"]))
    assert r.status_code == 200, r.text
    run = r.json()
    fields = {f["field"]: f for f in run["result"]["fields"]}
    assert fields["category_a"]["judge_percent"]["value"] == 1.0
    page = client.get(f"/v1/calibrate/{run['id']}/report", headers=auth(keys["calibrate"]))
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "framejudge calibration" in page.text
    assert client.get("/v1/calibrate/nope/report", headers=auth(keys["calibrate"])).status_code == 404
    r = client.post("/v1/calibrate", json={**body, "labels": []}, headers=auth(keys["calibrate"]))
    assert r.status_code == 422


def test_keys_cli_list_and_revoke(tmp_path):
    import os
    import subprocess
    import sys

    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": db, "COLUMNS": "200"}

    def keys(*args):
        return subprocess.run([sys.executable, "-m", "framejudge.cli", "keys", *args], env=env,
                              capture_output=True, text=True, timeout=60)

    key = keys("create", "--scope", "grade", "--name", "team-a").stdout.strip()
    key_id, secret = key.split("_", 2)[1:]
    listed = keys("list").stdout
    assert key_id in listed and "team-a" in listed and "active" in listed and secret not in listed
    client = TestClient(create_app(Settings(database_url=db)))
    assert client.get("/v1/rubrics", headers=auth(key)).status_code == 200
    for typo in (f"fj_{key_id}_{secret[:-1]}{'y' if secret.endswith('x') else 'x'}", f"fj_{key_id}_", f"fj_{key_id}_nope"):  # a mistyped key
        wrong = keys("revoke", typo)
        assert wrong.returncode == 2 and "Traceback" not in wrong.stderr, wrong.stderr
        assert wrong.stderr.startswith(f"error: that is not the secret of key {key_id}; nothing revoked")
        assert client.get("/v1/rubrics", headers=auth(key)).status_code == 200
    done = keys("revoke", key)
    assert done.returncode == 0 and key_id in done.stdout
    r = client.get("/v1/rubrics", headers=auth(key))
    assert r.status_code == 401 and "revoked" in r.json()["detail"]
    assert "revoked" in keys("list").stdout
    missing = keys("revoke", "0123456789ab")
    assert missing.returncode == 2 and "no API key" in missing.stderr and "Traceback" not in missing.stderr
    second = keys("create", "--scope", "grade").stdout.strip()
    by_id = keys("revoke", f"fj_{second.split('_', 2)[1]}")  # the id alone, with or without its prefix
    assert by_id.returncode == 0 and client.get("/v1/rubrics", headers=auth(second)).status_code == 401


def test_calibrations_are_visible_only_to_their_key(env):
    client, keys, tmp_path, _ = env
    engine = engine_for(f"sqlite:///{tmp_path / 'db.sqlite'}")
    other, admin = create_key(engine, ["calibrate"]), create_key(engine, ["admin"])
    graded = client.post("/v1/grade", json={"item": ITEM}, headers=auth(keys["grade"])).json()["records"]
    labels = [{"item_id": "a", "annotator": "x", "category_a": "Successful", "preference": "A"}]
    r = client.post("/v1/calibrate", json={"labels": labels, "verdicts": graded, "replicates": 20},
                    headers=auth(keys["calibrate"]))
    assert r.status_code == 200, r.text
    run_id = r.json()["id"]
    assert client.get(f"/v1/calibrate/{run_id}/report", headers=auth(keys["calibrate"])).status_code == 200
    mine = client.get(f"/v1/calibrate/{run_id}/report", headers=auth(other))
    missing = client.get("/v1/calibrate/0123456789abcdef/report", headers=auth(other))
    assert mine.status_code == 404 and mine.headers["content-type"] == "application/problem+json"
    assert mine.json()["title"] == missing.json()["title"] == "No such calibration"  # nothing tells them apart
    assert client.get(f"/v1/calibrate/{run_id}/report", headers=auth(admin)).status_code == 200


@pytest.mark.parametrize("video", ["loop.mp4", "sub/loop.mp4", "loop.mp4/inner.mp4"])
def test_symlink_loops_in_the_media_root_are_clear_4xx(env, video):
    client, keys, _, media = env
    (media / "loop.mp4").symlink_to(media / "loop.mp4")
    (media / "sub").symlink_to(media / "sub")
    calls = [("/v1/frames", {"video": video}), ("/v1/grade", {"item": {**ITEM, "video": video}}),
             ("/v1/jobs", [{**ITEM, "video": video}])]
    for route, body in calls:
        r = client.post(route, json=body, headers=auth(keys["grade"]))
        assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json", (route, r.text)
        assert "symbolic link loop" in r.json()["detail"] and video in r.json()["detail"]


def test_a_rubric_is_named_by_id_never_read_from_a_file_the_client_names(env, monkeypatch):
    """A rubric id ending in .yaml was read as a file in the server's working folder."""
    client, keys, tmp_path, _ = env
    builtin = Path(framejudge.rubrics.__file__).parent / "builtin" / "video-qa.yaml"
    (tmp_path / "mine.yaml").write_text(builtin.read_text().replace("id: video-qa", "id: mine", 1))
    monkeypatch.chdir(tmp_path)
    assert framejudge.rubrics.get_rubric("mine.yaml").id == "mine"  # the CLI reads files it is given
    r = client.post("/v1/grade", json={"item": ITEM, "rubric": "mine.yaml"}, headers=auth(keys["grade"]))
    assert r.status_code == 400 and r.json()["title"] == "Unknown rubric", r.text
    assert "no rubric with id 'mine.yaml'" in r.json()["detail"]
