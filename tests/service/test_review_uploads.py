"""Uploaded videos under review: `uploads prune` and DELETE /v1/videos/{id} keep what a stored
calibration (a review queue) shows, and a unit page whose video cannot be read names it by its
upload id, never by the server's path. The real app, a real worker, SQLite and PostgreSQL, and the
real `framejudge uploads prune`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import update

from framejudge.service.store import create_key
from framejudge.service.uploads import Upload
from tests.postgres import database_url  # noqa: F401
from tests.service.test_review import ITEMS, review_app, sign_in


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def finished(client, job_id: str, auth: dict[str, str]) -> None:
    deadline = time.time() + 60
    while client.get(f"/v1/jobs/{job_id}", headers=auth).json()["state"] != "done":
        assert time.time() < deadline, "the job did not finish"
        time.sleep(0.05)


def prune(database_url: str, upload_dir) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": database_url, "FRAMEJUDGE_UPLOAD_DIR": str(upload_dir)}
    return subprocess.run([sys.executable, "-m", "framejudge.cli", "uploads", "prune", "--older-than-days", "7"],
                          env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True)
def test_uploads_a_calibration_shows_are_kept_and_pages_name_them_by_id(tmp_path, database_url):
    with review_app(tmp_path, database_url, run_worker=True) as env:
        client, settings = env["client"], env["settings"]
        owner = create_key(env["engine"], ["calibrate", "review", "grade"], "lead")
        auth = bearer(owner)
        video = (env["media"] / "c.mp4").read_bytes()
        ids = [client.post("/v1/videos", files={"file": (f"c{k}.mp4", video + bytes(k), "video/mp4")},  # three contents
                           headers=auth).json()["videos"][0]["id"] for k in range(3)]
        by_job, by_ref, unused = ids
        # a job's calibration (its items resolved to server paths) and one of verdicts with the client's items
        job = client.post("/v1/jobs", json=[{**ITEMS[0], "video": by_job}], headers=auth).json()["id"]
        finished(client, job, auth)
        records = client.get(f"/v1/jobs/{job}/verdicts", headers=auth).json()["records"]
        labels = [{"item_id": "disputed", "annotator": a, "category_a": "Successful"} for a in ("h1", "h2")]
        run_job = client.post("/v1/calibrate", json={"job_id": job, "labels": labels, "replicates": 20}, headers=auth)
        assert run_job.status_code == 200, run_job.text
        item = {**ITEMS[0], "video": by_ref}
        run_ref = client.post("/v1/calibrate", json={"verdicts": records, "items": [item], "labels": labels,
                                                     "replicates": 20}, headers=auth)
        assert run_ref.status_code == 200, run_ref.text

        stranger = create_key(env["engine"], ["calibrate"], "stranger")  # naming another key's upload keeps nothing
        made = client.post("/v1/calibrate", json={"verdicts": records, "items": [{**ITEMS[0], "video": unused}],
                                                  "labels": labels, "replicates": 20}, headers=bearer(stranger))
        assert made.status_code == 200, made.text
        for ref, _run in ((by_job, run_job.json()["id"]), (by_ref, run_ref.json()["id"])):
            refused = client.delete(f"/v1/videos/{ref}", headers=auth)
            assert refused.status_code == 409, refused.text
            assert f"{ref} is shown by calibration " in refused.json()["detail"]  # by_job: the job's verdicts too
        assert f"is shown by calibration {run_ref.json()['id']}, " in client.delete(f"/v1/videos/{by_ref}",
                                                                                    headers=auth).json()["detail"]
        with env["engine"].begin() as conn:  # all three ten days old
            conn.execute(update(Upload).values(created_at=datetime.now(timezone.utc) - timedelta(days=10)))
        done = prune(settings.database_url, settings.upload_dir)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("deleted 1 upload(s)") and "kept 2 old upload(s)" in done.stdout, done.stdout
        stored = {p.name for p in settings.upload_dir.iterdir()}
        assert unused.removeprefix("upload:") + ".video" not in stored
        sign_in(client, owner)
        for ref, run in ((by_job, run_job.json()["id"]), (by_ref, run_ref.json()["id"])):
            assert ref.removeprefix("upload:") + ".video" in stored
            page = client.get(f"/review/{run}/unit", params={"item": "disputed"}).text
            assert 'src="data:image/jpeg;base64,' in page and "cannot be shown" not in page  # still shown

        # the file damaged on disk: the page says so, naming the upload, not where the server keeps it
        (settings.upload_dir / (by_job.removeprefix("upload:") + ".video")).write_bytes(b"\x00" * 64)
        page = client.get(f"/review/{run_job.json()['id']}/unit", params={"item": "disputed"}).text
        note = page.split('id="frames-note">')[1].split("</p>")[0]
        assert note.startswith(f"the video cannot be shown: {by_job}: "), note
        assert str(settings.upload_dir) not in page and str(tmp_path) not in page
        (settings.upload_dir / (by_job.removeprefix("upload:") + ".video")).unlink()
        page = client.get(f"/review/{run_job.json()['id']}/unit", params={"item": "disputed"}).text
        assert f"the video cannot be shown: {by_job}: " in page and str(tmp_path) not in page
