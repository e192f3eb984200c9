"""The service reaches self-hosted model servers: through a judges file (its judges are allowed,
paced by their endpoint, reported by /readyz) or FRAMEJUDGE_API_BASE; jobs are graded many at once."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from bench.model_server import ModelServer
from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for
from tests.service.test_jobs import auth, wait_done

pytest.importorskip("litellm")

JUDGE = "litellm:openai/bench"


def _items(n: int) -> list[dict]:
    return [{"id": f"i{k}", "turns": [{"question": f"[item i{k}] How many?", "golden": "2.",
                                       "response_a": "Two.", "response_b": "Three."}]} for k in range(n)]


def test_a_judges_file_judge_grades_jobs_concurrently_and_is_reported(tmp_path):
    with ModelServer(latency=0.3) as model:
        judges = tmp_path / "judges.yaml"
        judges.write_text(f"judges:\n  - spec: {JUDGE}\n    api_base: {model.base_url}\n    concurrency: 8\n"
                          f"    max_concurrency: 8\n")
        settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                            judges_file=judges)
        key = create_key(engine_for(settings.database_url), ["grade"])
        scraper = create_key(engine_for(settings.database_url), ["metrics"])
        with TestClient(create_app(settings)) as client:
            assert client.get("/readyz").json() == {"status": "ready"}  # the endpoint is not for anyone to see
            ready = client.get("/readyz", headers=auth(scraper)).json()
            [ref, bench] = ready["judges"]
            assert ref["spec"] == "reference" and bench["spec"] == JUDGE and bench["api_base"] == model.base_url
            assert bench["endpoint"]["maximum"] == 8
            job = client.post(f"/v1/jobs?judge={JUDGE}", headers=auth(key),
                              json={"items": _items(40), "options": {"swap": True, "cache": False}}).json()["id"]
            status = wait_done(client, job, key, timeout=120)
        stats = model.stats()
    assert status["done"] == 40 and status["judge_errors"] == 0
    assert stats["completed"] == 80 and stats["peak_in_flight"] == 8  # many in flight, never above the limit
    assert all(n == 2 for n in stats["by_tag"].values())


def test_the_service_uses_framejudge_api_base_for_judges_without_an_entry(tmp_path, monkeypatch):
    with ModelServer(latency=0.01) as model:
        monkeypatch.setenv("FRAMEJUDGE_SERVICE_DB", f"sqlite:///{tmp_path / 'db.sqlite'}")
        monkeypatch.setenv("FRAMEJUDGE_UPLOAD_DIR", str(tmp_path / "uploads"))
        monkeypatch.setenv("FRAMEJUDGE_SERVICE_JUDGES", JUDGE)
        monkeypatch.setenv("FRAMEJUDGE_API_BASE", model.base_url)
        settings = Settings.from_env()
        key = create_key(engine_for(settings.database_url), ["grade"])
        with TestClient(create_app(settings)) as client:
            r = client.post("/v1/grade", headers=auth(key),
                            json={"item": _items(1)[0], "judge": JUDGE, "options": {"swap": False, "cache": False}})
        assert model.stats()["completed"] == 1
    assert r.status_code == 200, r.text
    [v] = r.json()["records"]
    assert v["record"] == "verdict" and v["provenance"]["model_id"] == "openai/bench"


def test_job_options_come_from_one_place(tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                        run_worker=False)
    key = create_key(engine_for(settings.database_url), ["grade"])
    with TestClient(create_app(settings)) as client:
        body = {"items": _items(2), "options": {"sampler": {"n": 4, "strategy": "scene"}, "jpeg_quality": 70},
                "priority": 4}
        status = client.post("/v1/jobs", json=body, headers=auth(key)).json()
        assert status["options"]["sampler"]["n"] == 4 and status["options"]["sampler"]["strategy"] == "scene"
        assert status["options"]["jpeg_quality"] == 70 and status["priority"] == 4
        jsonl = "\n".join(__import__("json").dumps(i) for i in _items(2))
        h = {**auth(key), "Content-Type": "application/x-ndjson"}
        r = client.post('/v1/jobs?options={"swap":false,"sampler":{"n":2}}', content=jsonl, headers=h)
        assert r.status_code == 202 and r.json()["options"]["swap"] is False and r.json()["options"]["sampler"]["n"] == 2
        r = client.post("/v1/jobs?n=3&lookback=5", json=_items(1), headers=auth(key))
        assert r.json()["options"]["sampler"]["n"] == 3 and r.json()["options"]["sampler"]["lookback"] == 5
        bad = [
            ("/v1/jobs?n=3", {"items": _items(1), "options": {"swap": True}}, "shorthands"),
            ('/v1/jobs?options={"swap":true}', {"items": _items(1), "options": {"swap": True}}, "give the options once"),
            ("/v1/jobs", {"items": _items(1), "options": {"samples": 0}}, "samples"),
            ("/v1/jobs", {"items": _items(1), "options": {"sampler": {"strategy": "fps"}}}, "fps"),
            ("/v1/jobs", {"items": _items(1), "options": {"colour": "red"}}, "colour"),
            ("/v1/jobs", {"items": _items(1), "priority": 1000}, "priority"),
            ("/v1/jobs", {"items": _items(1), "surprise": 1}, "surprise"),
            ("/v1/jobs?options=not-json", _items(1), "options are JSON"),
        ]
        for url, payload, words in bad:
            r = client.post(url, json=payload, headers=auth(key))
            assert r.status_code == 422 and words in r.json()["detail"], (url, r.status_code, r.text)
        r = client.post("/v1/grade", json={"item": _items(1)[0], "sampler": {"n": 2}, "options": {}}, headers=auth(key))
        assert r.status_code == 422 and "inside options" in r.json()["detail"]


def test_ambiguous_or_misspelt_submissions_are_refused(tmp_path, clips):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                        run_worker=False)
    key = create_key(engine_for(settings.database_url), ["grade"])
    jsonl = "\n".join(__import__("json").dumps({**i, "video": "clip.mp4"}) for i in _items(1))
    with TestClient(create_app(settings)) as client:
        data = clips["h264"].read_bytes()
        r = client.post("/v1/jobs", headers=auth(key), data={"items": jsonl},
                        files=[("video", ("clip.mp4", data, "video/mp4")), ("video", ("clip.mp4", data, "video/mp4"))])
        assert r.status_code == 422 and "two uploaded videos are named 'clip.mp4'" in r.json()["detail"]
        r = client.post("/v1/jobs", headers=auth(key), data={"items": jsonl, "opts": "{}"},
                        files=[("video", ("clip.mp4", data, "video/mp4"))])
        assert r.status_code == 422 and "unknown multipart part(s): opts" in r.json()["detail"]
        twice = [_items(1)[0], _items(1)[0]]
        r = client.post("/v1/jobs", json=twice, headers=auth(key))
        assert r.status_code == 422 and "item 1: duplicate item id 'i0'" in r.json()["detail"]
        r = client.post("/v1/grade", json={"item": _items(1)[0], "option": {"swap": True}}, headers=auth(key))
        assert r.status_code == 422 and "option" in r.json()["detail"]
