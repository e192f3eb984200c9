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
from framejudge.service.store import check_key, create_key, engine_for
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
        _wait(client, job_id, auth, 120)
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
        [listed] = client.get("/v1/leaderboards", headers=auth).json()["leaderboards"]
        assert (listed["id"], listed["job_id"]) == (board_id, job_id)
        assert client.get("/v1/leaderboards", headers=stranger).json()["leaderboards"] == []
        assert client.post("/v1/leaderboards", json={"job_id": job_id}, headers=stranger).status_code == 404
        plain = client.post("/v1/jobs", json=[{"id": "x", "turns": [{"question": "q?", "response_a": "a",
                                                                      "response_b": "b"}]}], headers=auth).json()["id"]
        _wait(client, plain, auth)
        refused = client.post("/v1/leaderboards", json={"job_id": plain}, headers=auth)
        assert refused.status_code == 422 and "is not a battle item" in refused.json()["detail"]
        unknown = client.post("/v1/leaderboards", json={"job_id": job_id, "baseline": "delta"}, headers=auth)
        assert unknown.status_code == 422, unknown.text


def _battle_rows(folder) -> list[dict]:
    """Battle items of three models on plain items (no video), every pair, as --items-out writes them."""
    from framejudge.leaderboard.inputs import load_lineup
    from framejudge.leaderboard.plan import model_pairs, plan_battles
    from tests.leaderboard.lineups import plain_items, responses_file

    answers = responses_file(folder / "answers.jsonl", plain_items(4), {
        "alpha": lambda i, k, t: f"The number {i}.", "beta": lambda i, k, t: f"The number {i + 1}.",
        "gamma": lambda i, k, t: "I'm sorry, but I can't help with that request."})
    lineup = load_lineup([answers])
    plan = plan_battles(lineup, model_pairs(lineup.models, all_pairs=True))
    return [it.model_dump(mode="json", exclude_none=True) for it in plan.items]


def _wait(client, job_id, auth, timeout=60):
    """Poll a job until it is done, slowly enough to stay inside the key's request rate."""
    deadline = time.time() + timeout
    while True:
        status = client.get(f"/v1/jobs/{job_id}", headers=auth)
        assert status.status_code == 200, status.text
        if status.json()["state"] == "done":
            return
        assert time.time() < deadline, "the job did not finish"
        time.sleep(0.25)


def test_battle_items_that_are_not_one_plans_battles_are_refused_naming_the_item(tmp_path, database_url):
    from framejudge.schema import GradeOptions, Item
    from framejudge.service.jobs import create_job

    rows = _battle_rows(tmp_path)
    one = next(r for r in rows if r["id"].startswith("q0@"))
    other = next(r for r in rows if r["id"].startswith("q0@") and r is not one)
    shared = ({one["metadata"]["battle"]["model_a"], one["metadata"]["battle"]["model_b"]}
              & {other["metadata"]["battle"]["model_a"], other["metadata"]["battle"]["model_b"]}).pop()

    def changed(row, change):
        row = json.loads(json.dumps(row))
        change(row)
        return row

    def copy_of(row, suffix):
        return changed(row, lambda r: r.update(id=r["id"] + suffix))

    def other_answer(r):  # the shared model's answer to q0 differs from the one in `one`
        meta, turn = r["metadata"]["battle"], r["turns"][0]
        turn["response_a" if meta["model_a"] == shared else "response_b"] += " Or maybe not."

    cases = {
        "empty model name": ([changed(one, lambda r: r["metadata"]["battle"].update(model_a=""))], one["id"],
                             "metadata.battle.model_a"),
        "model name an object": ([changed(one, lambda r: r["metadata"]["battle"].update(model_b={"name": "x"}))],
                                 one["id"], "metadata.battle.model_b"),
        "turn past the end": ([changed(one, lambda r: r["metadata"]["battle"].update(turns=[3]))], one["id"],
                              "past the end"),
        "the same battle three times": ([one, copy_of(one, "-again"), copy_of(one, "-thrice")], one["id"] + "-again",
                                        "is also battle item"),
        "an answer that differs": ([one, changed(other, other_answer)], other["id"], f"model {shared!r}'s answer"),
    }
    settings = Settings(database_url=database_url, upload_dir=tmp_path / "uploads")
    engine = engine_for(settings.database_url)
    auth = {"Authorization": f"Bearer {create_key(engine, ['grade'])}"}
    with TestClient(create_app(settings)) as client:
        for name, (items, named, why) in cases.items():
            got = client.post("/v1/jobs", json=items, headers=auth)
            assert got.status_code == 422, (name, got.text)
            detail = got.json()["detail"]
            assert f"battle item {named!r}" in detail and why in detail, (name, detail)
        # a job stored before these checks (graded by the worker): its board is a 422 naming the item, not a 500
        token = auth["Authorization"].split()[1]
        for name in ("empty model name", "the same battle three times"):
            items, named, why = cases[name]
            job_id, _ = create_job(engine, check_key(engine, token).id, [Item.model_validate(r) for r in items],
                                   "reference", "video-qa", GradeOptions(), None)
            _wait(client, job_id, auth)
            got = client.post("/v1/leaderboards", json={"job_id": job_id, "replicates": 10}, headers=auth)
            assert got.status_code == 422, (name, got.text)
            assert f"battle item {named!r}" in got.json()["detail"] and why in got.json()["detail"]


def test_a_job_of_battle_items_grades_both_orders_as_the_cli_does(tmp_path, database_url):
    rows = _battle_rows(tmp_path)
    settings = Settings(database_url=database_url, upload_dir=tmp_path / "uploads")
    engine = engine_for(settings.database_url)
    auth = {"Authorization": f"Bearer {create_key(engine, ['grade'])}"}
    with TestClient(create_app(settings)) as client:
        job = client.post("/v1/jobs", json=rows, headers=auth)
        assert job.status_code == 202, job.text
        assert job.json()["options"]["swap"] is True  # the battles' default, as `framejudge leaderboard`'s
        _wait(client, job.json()["id"], auth)
        board = client.post("/v1/leaderboards", json={"job_id": job.json()["id"], "replicates": 10},
                            headers=auth).json()["board"]
        # every battle the judge decided (not an error string's rule) was graded both ways
        assert board["bias"]["swap_graded"] > 0 and board["bias"]["position_consistency"] is not None
        said = client.post("/v1/jobs", json={"items": rows, "options": {"swap": False}}, headers=auth)
        assert said.json()["options"]["swap"] is False  # a job that says otherwise is graded as it says
        plain = client.post("/v1/jobs", json=[{"id": "x", "turns": [{"question": "q?", "response_a": "a",
                                                                      "response_b": "b"}]}], headers=auth)
        assert plain.json()["options"]["swap"] is None  # other jobs keep the judge's default


def test_a_board_on_one_item_draws_its_page_and_ties_share_a_rank(tmp_path):
    # one item, three models, every pair: one bootstrap cluster, so every replicate is the same and
    # each strength's interval is one value (up to the fits' rounding); alpha and gamma give the
    # same answer, so they are exactly as strong
    from framejudge.leaderboard.inputs import load_lineup
    from framejudge.leaderboard.plan import model_pairs, plan_battles
    from tests.leaderboard.lineups import plain_items, responses_file

    answers = responses_file(tmp_path / "answers.jsonl", plain_items(1), {
        "alpha": lambda i, k, t: f"The number {i}.", "beta": lambda i, k, t: f"The number {i + 1}.",
        "gamma": lambda i, k, t: f"The number {i}."})
    lineup = load_lineup([answers])
    rows = [it.model_dump(mode="json", exclude_none=True)
            for it in plan_battles(lineup, model_pairs(lineup.models, all_pairs=True)).items]
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads")
    engine = engine_for(settings.database_url)
    auth = {"Authorization": f"Bearer {create_key(engine, ['grade'])}"}
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        job = client.post("/v1/jobs", json=rows, headers=auth).json()
        _wait(client, job["id"], auth)
        built = client.post("/v1/leaderboards", json={"job_id": job["id"], "replicates": 20}, headers=auth)
        assert built.status_code == 201, built.text
        models = {m["model"]: m for m in built.json()["board"]["models"]}
        for m in models.values():
            s = m["strength"]
            assert s["low"] == s["high"] == s["estimate"] or s["low"] <= s["estimate"] <= s["high"]
        assert models["alpha"]["rank"] == models["gamma"]["rank"]
        assert sorted(m["rank"] for m in models.values()) in ([1, 1, 3], [1, 2, 2])
        page = client.get(f"/v1/leaderboards/{built.json()['id']}/page", headers=auth)
        assert page.status_code == 200 and 'id="strength-plot"' in page.text
