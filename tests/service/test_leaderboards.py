"""POST /v1/leaderboards from a job's records: battle items written by `framejudge leaderboard
--items-out`, submitted as a job to the real app (SQLite), graded by its worker; the board, its
page, and who may see them."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from fastapi.testclient import TestClient

from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for
from tests.leaderboard.test_battles import three_models


def test_a_battle_jobs_leaderboard(bundled_examples, tmp_path):
    answers = three_models(bundled_examples, tmp_path)
    items = tmp_path / "battle-items.jsonl"
    made = subprocess.run([sys.executable, "-m", "framejudge.cli", "leaderboard", str(answers), "--battles",
                           str(tmp_path / "unused.jsonl"), "--pairs", "all", "--items-out", str(items)],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    assert not (tmp_path / "unused.jsonl").exists()  # nothing graded
    lines = items.read_text().splitlines()
    assert lines and all("battle" in json.loads(x)["metadata"] for x in lines)
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=bundled_examples.parent,
                        upload_dir=tmp_path / "uploads")
    engine = engine_for(settings.database_url)
    key, other = create_key(engine, ["grade"]), create_key(engine, ["grade"])
    auth = {"Authorization": f"Bearer {key}"}
    with TestClient(create_app(settings)) as client:
        job = client.post("/v1/jobs", content=items.read_text(), headers={**auth, "Content-Type": "application/x-ndjson"})
        assert job.status_code == 202, job.text
        job_id = job.json()["id"]
        deadline = time.time() + 120
        while client.get(f"/v1/jobs/{job_id}", headers=auth).json()["state"] != "done":
            assert time.time() < deadline, "the job did not finish"
            time.sleep(0.05)
        built = client.post("/v1/leaderboards", json={"job_id": job_id, "replicates": 100, "by": ["domain"]},
                            headers=auth)
        assert built.status_code == 201, built.text
        board = built.json()["board"]
        assert {m["model"] for m in board["models"]} == {"alpha", "beta", "gamma"}
        assert board["battles"] == sum(len(json.loads(x)["turns"]) for x in lines)
        gamma = next(m for m in board["models"] if m["model"] == "gamma")
        assert gamma["successful"]["estimate"] is not None and "domain" in board["slices"]
        # the tie columns in the words of the job's rubric
        assert board["rubric"] == "video-qa 1.1.0" and board["ties"]["Neither"]["label"] == "both bad"
        board_id = built.json()["id"]
        assert client.get(f"/v1/leaderboards/{board_id}", headers=auth).json()["board"] == board
        page = client.get(f"/v1/leaderboards/{board_id}/page", headers=auth)
        assert page.status_code == 200 and "<html" in page.text and "gamma" in page.text
        assert page.headers["x-content-type-options"] == "nosniff" and page.headers["x-frame-options"] == "DENY"
        assert "default-src 'none'" in page.headers["content-security-policy"] and "<script" not in page.text
        stranger = {"Authorization": f"Bearer {other}"}
        assert client.get(f"/v1/leaderboards/{board_id}", headers=stranger).status_code == 404
        assert client.post("/v1/leaderboards", json={"job_id": job_id}, headers=stranger).status_code == 404
        plain = client.post("/v1/jobs", json=[{"id": "x", "turns": [{"question": "q?", "response_a": "a",
                                                                      "response_b": "b"}]}], headers=auth).json()["id"]
        while client.get(f"/v1/jobs/{plain}", headers=auth).json()["state"] != "done":
            time.sleep(0.05)
        refused = client.post("/v1/leaderboards", json={"job_id": plain}, headers=auth)
        assert refused.status_code == 422 and "is not a battle item" in refused.json()["detail"]
        unknown = client.post("/v1/leaderboards", json={"job_id": job_id, "baseline": "delta"}, headers=auth)
        assert unknown.status_code == 422, unknown.text
