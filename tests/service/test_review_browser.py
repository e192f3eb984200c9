"""The review page in a real headless Chromium (Debian's package) against a real uvicorn server on
loopback: sign in on the form, walk the queue with the keyboard (adopt the judge, adopt an
annotator, relabel by hand with a cause, each chosen and then submitted), go back, blind mode,
export, and an expired session sent back to sign in; no script error and nothing loaded from
elsewhere."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from framejudge.service.app import create_app
from framejudge.service.review.store import SessionRow
from framejudge.service.settings import Settings
from framejudge.service.store import engine_for
from tests.chromium import CHROMIUM, Page, devtools_page
from tests.service.servers import uvicorn_server
from tests.service.test_review import calibration, review_app

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package 'chromium')")


@pytest.fixture()
def server(tmp_path):
    with review_app(tmp_path) as env:  # the calibration, made through the API
        made = calibration(env)
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=tmp_path / "media",
                        upload_dir=tmp_path / "uploads", run_worker=False)
    with uvicorn_server(create_app(settings)) as url:
        yield {"url": url, "engine": engine_for(settings.database_url), **made}


async def _walk(ws_url: str, srv: dict) -> dict:
    import aiohttp

    base, run = srv["url"], srv["id"]
    seen: dict = {}
    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:
        page = Page(ws)
        await page.start()
        url = await page.go(f"{base}/review/{run}")
        seen["sign_in_url"] = url
        await page.value(f"document.getElementById('api_key').value = {json.dumps(srv['owner'])}")
        await page.value("document.getElementById('api_key').focus()")
        await page.press("Enter")  # the form's own submit
        url = await page.loaded(url)
        seen["after_sign_in"] = url
        await page.press("n")  # start reviewing
        url = await page.loaded(url)
        seen["first_unit"] = url
        await page.press("j")  # choose the judge's labels, then submit
        await page.press("Enter")
        url = await page.loaded(url)
        seen["second_unit"] = url
        await page.press("1")  # choose the first annotator's labels, then submit
        await page.press("Enter")
        url = await page.loaded(url)
        seen["third_unit"] = url
        await page.press("h")  # by hand, to the first field: choose a label, leave the field, tag the cause, submit
        seen["focused"] = await page.value("document.activeElement.id")
        await page.value("(() => { const s = document.activeElement; s.value = 'Irrelevant';"
                         " s.dispatchEvent(new Event('change', {bubbles: true})); })()")
        await page.press("Escape")
        await page.press("w")
        seen["cause_checked"] = await page.value("document.getElementById('cause-judge_wrong').checked")
        await page.press("Enter")
        url = await page.loaded(url)
        seen["fourth_unit"] = url
        await page.press("p")  # back
        url = await page.loaded(url)
        seen["previous"] = url
        seen["shortcuts"] = await page.value("document.getElementById('shortcuts').innerText")
        await page.go(f"{base}/review/{run}/unit?item=talk&turn=1&blind=1")
        seen["blind"] = await page.value("JSON.stringify({judge: !!document.getElementById('judge'),"
                                         " labels: !!document.getElementById('labels'),"
                                         " adopt: !!document.getElementById('adopt-judge'),"
                                         " question: document.getElementById('question').textContent})")
        seen["blind_text"] = await page.value("document.body.innerText")
        seen["frames"] = await page.value("document.querySelectorAll('img.thumb').length")
        await page.value("document.querySelector('img.thumb').click()")
        seen["enlarged"] = await page.value("!document.getElementById('enlarged').hidden && "
                                            "document.querySelector('#enlarged img').naturalWidth")
        await page.press("Escape")
        seen["closed"] = await page.value("document.getElementById('enlarged').hidden")
        await page.go(f"{base}/review/{run}?blind=1")
        seen["blind_queue"] = await page.value("document.getElementById('units').innerText")
        seen["export"] = await page.value(f"fetch('/review/{run}/labels?format=csv').then(r => r.text())")
        seen["cookie_visible"] = await page.value("document.cookie")
        with Session(srv["engine"]) as s, s.begin():
            s.execute(update(SessionRow).values(expires_at=datetime.now(timezone.utc) - timedelta(seconds=1)))
        url = await page.go(f"{base}/review/{run}")
        seen["expired_url"] = url
        seen["expired_text"] = await page.value("document.body.innerText")
        seen["errors"] = page.errors
    return seen


def test_review_in_headless_chromium(server):
    with devtools_page("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1") as ws:
        seen = asyncio.run(_walk(ws, server))
    assert seen["errors"] == []
    assert "/review/sign-in?next=" in seen["sign_in_url"]
    assert seen["after_sign_in"].endswith(f"/review/{server['id']}")
    assert "item=disputed" in seen["first_unit"] and "item=split" in seen["second_unit"]
    assert seen["focused"] == "field-category_a" and seen["cause_checked"] is True
    assert seen["previous"] != seen["fourth_unit"] and "/unit?" in seen["previous"]
    assert "choose the judge's labels" in seen["shortcuts"] and "skip" in seen["shortcuts"]
    blind = json.loads(seen["blind"])
    assert blind == {"judge": False, "labels": False, "adopt": False, "question": "And now?"}
    told = ("judge disagrees", "annotators disagree", "judge and annotators agree")
    for text in (seen["blind_text"], seen["blind_queue"]):  # nor why a unit is here, nor the fields in dispute
        assert not any(t in text for t in told), text
    assert "category_a" not in seen["blind_queue"] and "fields in dispute" not in seen["blind_queue"]
    assert seen["frames"] > 0 and seen["enlarged"] > 0 and seen["closed"] is True
    assert "adjudicated" in seen["export"] and seen["export"].startswith("item_id,turn,annotator")
    assert seen["cookie_visible"] == ""  # HttpOnly: the page's scripts cannot read the session
    assert "/review/sign-in" in seen["expired_url"] and "expired" in seen["expired_text"]
    decisions = httpx.get(f"{server['url']}/v1/calibrate/{server['id']}/decisions",
                          headers={"Authorization": f"Bearer {server['owner']}"}).json()
    assert [(d["item_id"], d["action"]) for d in decisions][:2] == [("disputed", "adopt_judge"), ("split", "adopt_annotator")]
    assert decisions[1]["source"] == "h1"
    third = decisions[2]
    assert third["action"] == "manual" and third["labels"]["category_a"] == "Irrelevant" and third["cause"] == "judge_wrong"
