"""The queue page's figures are refreshed in the background: a page never waits for a bootstrap
(the figures it shows are the latest, marked stale and counted while a refresh runs), one refresh
runs per calibration however many pages and decisions come meanwhile, a decision that leaves the
gold as it was costs none, and what is kept between requests never outlives who may review."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from typing import Any

import pytest

from framejudge.service.app import create_app
from framejudge.service.review import figures as figures_module
from framejudge.service.settings import Settings
from tests.chromium import CHROMIUM, devtools_page
from tests.postgres import database_url  # noqa: F401 - the fixture
from tests.service.servers import uvicorn_server
from tests.service.test_review import calibration, current_queue, decide, review_app, sign_in, unit_version


def after(page: str, field: str = "category_a") -> str:
    row = page.split(f'<tr data-field="{field}">')[1].split("</tr>")[0]
    return re.search(r'class="after-percent">([^<]+)<', row).group(1)


@pytest.fixture()
def gated(monkeypatch):
    """The real figures, computed only once the test opens the gate (a bootstrap that takes a while),
    counted."""
    gate, calls = threading.Event(), []
    real = figures_module.shifts

    def slow(*args: Any) -> Any:
        calls.append(threading.current_thread().name)
        assert gate.wait(120), "the gate was never opened"
        return real(*args)

    monkeypatch.setattr(figures_module, "shifts", slow)
    yield gate, calls
    gate.set()


def test_the_queue_shows_the_latest_figures_marked_stale_while_they_refresh(tmp_path, database_url, gated):
    gate, calls = gated
    with review_app(tmp_path, database_url) as env:
        env.update(calibration(env))
        client, run_id = env["client"], env["id"]
        sign_in(client, env["owner"])
        first = client.get(f"/review/{run_id}")  # nothing measured yet: the page comes at once and says so
        assert first.status_code == 200 and 'id="figures-pending"' in first.text and 'id="units"' in first.text
        gate.set()
        start = current_queue(client, run_id).text
        assert 'data-decisions="0"' in start and len(calls) == 1
        before = after(start)
        gate.clear()

        judge_said = env["judged"][("disputed", 0)]["response_a"]["category"]
        assert decide(client, run_id, "disputed", action="adopt_judge", cause="humans_wrong").status_code == 303
        for _ in range(3):  # every page while the refresh runs: the old figures, marked, and no second refresh
            page = client.get(f"/review/{run_id}")
            assert page.status_code == 200 and 'id="figures-stale"' in page.text, page.text
            assert 'class="stale"' in page.text and after(page.text) == before
            assert "count 0 decision(s)" in page.text and "the 1 made since" in page.text
        assert len(calls) == 2  # the decision started the refresh; the pages only waited for it
        assert decide(client, run_id, "split", action="manual", category_a=judge_said,
                      category_b="Successful").status_code == 303
        stale = client.get(f"/review/{run_id}").text
        assert "the 2 made since" in stale and len(calls) == 2  # taken in by one refresh after the running one

        gate.set()
        fresh = current_queue(client, run_id).text
        assert 'data-decisions="2"' in fresh and 'class="fresh"' in fresh and float(after(fresh)) > float(before)
        assert len(calls) == 3
        assert decide(client, run_id, "agreed", action="skip").status_code == 303  # the gold stays as it was
        assert 'data-decisions="3"' in current_queue(client, run_id).text and len(calls) == 3


def test_a_unit_page_and_a_decision_never_wait_for_the_figures(tmp_path, gated):
    gate, calls = gated
    with review_app(tmp_path) as env:
        env.update(calibration(env))
        client, run_id = env["client"], env["id"]
        sign_in(client, env["owner"])
        assert 'id="figures-pending"' in client.get(f"/review/{run_id}").text  # the first refresh, held
        unit = client.get(f"/review/{run_id}/unit", params={"item": "disputed", "turn": 0})
        assert unit.status_code == 200
        assert decide(client, run_id, "disputed", action="adopt_judge", cause="humans_wrong").status_code == 303
        version = unit_version(client, run_id, env["owner"], "split")
        api = client.post(f"/v1/calibrate/{run_id}/decisions",
                          json={"item_id": "split", "action": "adopt_judge", "unit_version": version},
                          headers={"Authorization": f"Bearer {env['owner']}"})
        assert api.status_code == 201, api.text
        assert len(calls) == 1  # held at the gate all along
        gate.set()
        assert 'data-decisions="2"' in current_queue(client, run_id).text


def test_what_a_queue_keeps_between_requests_never_outlives_who_may_review(tmp_path):
    with review_app(tmp_path) as env:
        env.update(calibration(env))
        client, run_id = env["client"], env["id"]
        owner = {"Authorization": f"Bearer {env['owner']}"}
        sign_in(client, env["second"])
        assert current_queue(client, run_id).status_code == 200  # read once, and kept
        assert client.put(f"/v1/calibrate/{run_id}/reviewers", json={"reviewers": []}, headers=owner).status_code == 200
        assert client.get(f"/review/{run_id}").status_code == 404
        assert client.get(f"/review/{run_id}/unit", params={"item": "disputed", "turn": 0}).status_code == 404
        # the decisions kept between requests are every decision, whichever key made them
        sign_in(client, env["owner"])
        assert decide(client, run_id, "disputed", action="adopt_judge", cause="humans_wrong").status_code == 303
        got = client.get(f"/v1/calibrate/{run_id}/decisions", headers=owner).json()
        assert [d["item_id"] for d in got] == ["disputed"]


def test_figures_that_cannot_be_computed_say_so_and_the_queue_still_opens(tmp_path, monkeypatch, caplog):
    def broken(*_: Any) -> Any:
        raise ValueError("no replicate could be drawn")

    monkeypatch.setattr(figures_module, "shifts", broken)
    with review_app(tmp_path, review_figures_wait_s=0) as env:
        env.update(calibration(env))
        client, run_id = env["client"], env["id"]
        sign_in(client, env["owner"])
        client.get(f"/review/{run_id}")
        for _ in range(600):  # until the refresh has failed
            page = client.get(f"/review/{run_id}")
            if 'id="figures-error"' in page.text:
                break
            time.sleep(0.05)
        assert page.status_code == 200 and 'id="units"' in page.text
        assert "the figures could not be computed (ValueError: no replicate could be drawn)" in page.text
        assert 'id="figures-pending"' not in page.text and 'id="figures"' not in page.text
    assert "could not be computed" in caplog.text


async def _stale_in_the_browser(ws_url: str, base: str, run: str, owner: str, gate: threading.Event) -> dict:
    import aiohttp

    from tests.chromium import Page

    seen: dict = {}
    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:
        page = Page(ws)
        await page.start()
        url = await page.go(f"{base}/review/{run}")
        await page.value(f"document.getElementById('api_key').value = {json.dumps(owner)}")
        await page.value("document.getElementById('api_key').focus()")
        await page.press("Enter")
        url = await page.loaded(url)
        seen["first"] = await page.value("document.getElementById('figures-pending').innerText")
        gate.set()
        for _ in range(600):
            await asyncio.sleep(0.05)
            url = await page.go(f"{base}/review/{run}")
            if await page.value("!!document.querySelector('#figures.fresh')"):
                break
        gate.clear()
        await page.press("n")  # start reviewing, adopt the judge on the first unit, back to the queue
        url = await page.loaded(url)
        await page.press("j")
        await page.press("Enter")
        url = await page.loaded(url)
        await page.press("q")
        await page.loaded(url)
        seen["stale"] = await page.value("document.getElementById('figures-stale').innerText")
        seen["grey"] = await page.value("getComputedStyle(document.querySelector('#figures td')).color")
        gate.set()
        for _ in range(600):
            await asyncio.sleep(0.05)
            await page.go(f"{base}/review/{run}")
            if await page.value("!!document.querySelector('#figures.fresh')"):
                break
        seen["fresh"] = await page.value("JSON.stringify([!!document.getElementById('figures-stale'), "
                                         "document.getElementById('figures').dataset.decisions, "
                                         "getComputedStyle(document.querySelector('#figures td')).color])")
        seen["errors"] = page.errors
    return seen


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package 'chromium')")
def test_the_stale_mark_in_headless_chromium(tmp_path, gated):
    gate, _ = gated
    with review_app(tmp_path) as env:
        made = calibration(env)
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=tmp_path / "media",
                        upload_dir=tmp_path / "uploads", run_worker=False)
    gate.clear()  # the calibration's own page views above may have opened it
    with uvicorn_server(create_app(settings)) as url, \
            devtools_page("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1") as ws:
        seen = asyncio.run(_stale_in_the_browser(ws, url, made["id"], made["owner"], gate))
    assert seen["errors"] == []
    assert "being computed in the background" in seen["first"]
    assert "Stale, refreshing" in seen["stale"] and "count 0 decision(s)" in seen["stale"] and "1 made since" in seen["stale"]
    assert seen["grey"] == "rgb(119, 119, 119)"  # the stale figures are greyed
    assert json.loads(seen["fresh"])[:2] == [False, "1"] and json.loads(seen["fresh"])[2] != seen["grey"]
