"""A review decision is deliberate, in a real headless Chromium (Debian's package) against a real
uvicorn server on loopback: choosing (j, 1-9, h) submits nothing, Enter submits only a chosen
decision on the unit on screen, a bare Enter on an untouched unit saves nothing, and keys typed
while a submit is on its way act on no unit."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.chromium import CHROMIUM, Page, devtools_page
from tests.service.test_review_browser import server  # noqa: F401 - the fixture

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package 'chromium')")

# counts the decision form's submissions on this page (a submission starts within the key's handler)
COUNT_SUBMITS = ("window.submits = 0; document.getElementById('decision')"
                 ".addEventListener('submit', () => { window.submits += 1; })")


# a key pressed as the page's script sees it: a keydown on the focused element, bubbling to the document
TYPE = ("(key => (document.activeElement || document.body).dispatchEvent("
        "new KeyboardEvent('keydown', {key, bubbles: true, cancelable: true})))")


def decisions(srv: dict) -> list[dict]:
    got = httpx.get(f"{srv['url']}/v1/calibrate/{srv['id']}/decisions",
                    headers={"Authorization": f"Bearer {srv['owner']}"})
    assert got.status_code == 200, got.text
    return got.json()


async def _signed_in(ws, srv: dict, then: str) -> tuple[Page, str]:  # type: ignore[no-untyped-def]
    page = Page(ws)
    await page.start()
    url = await page.go(f"{srv['url']}/review/sign-in?next=" + then)
    await page.value(f"document.getElementById('api_key').value = {json.dumps(srv['owner'])}")
    await page.value("document.getElementById('api_key').focus()")
    await page.press("Enter")
    return page, await page.loaded(url)


def run(srv: dict, walk) -> dict:  # type: ignore[no-untyped-def]
    async def go(ws_url: str) -> dict:
        import aiohttp

        async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:
            seen = await walk(ws)
        return seen

    with devtools_page("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1") as ws_url:
        return asyncio.run(go(ws_url))


def unit_path(srv: dict, item: str) -> str:
    return f"/review/{srv['id']}/unit%3Fitem%3D{item}%26turn%3D0"


def test_one_then_a_cause_then_enter_decides_the_unit_on_screen_and_no_other(server):
    async def walk(ws) -> dict:  # type: ignore[no-untyped-def]
        page, url = await _signed_in(ws, server, unit_path(server, "disputed"))
        seen = {"first": url, "version": await page.value("document.getElementById('version').value")}
        await page.value(COUNT_SUBMITS)
        await page.press("1")  # annotator 1's labels, chosen
        seen["after_1"] = await page.value("JSON.stringify({submits: window.submits, url: location.href,"
                                           " chosen: document.querySelector('input[name=action]:checked').value,"
                                           " category_a: document.getElementById('field-category_a').value})")
        await page.press("w")  # the cause
        await page.press("Enter")  # the decision, submitted
        url = await page.loaded(url)
        seen["next"] = url
        seen["next_untouched"] = await page.value(
            "document.querySelector('input[name=action]:checked') === null && document.getElementById('submit').disabled")
        seen["errors"] = page.errors
        return seen

    seen = run(server, walk)
    assert seen["errors"] == []
    after_1 = json.loads(seen["after_1"])
    h1 = next(label for label in server["labels"] if label["item_id"] == "disputed" and label["annotator"] == "h1")
    assert after_1 == {"submits": 0, "url": seen["first"], "chosen": "adopt_annotator:h1",
                       "category_a": h1["category_a"]}  # chosen and shown, nothing submitted
    assert "item=disputed" in seen["first"] and "item=split" in seen["next"] and seen["next_untouched"] is True
    [made] = decisions(server)  # one decision, on the unit that was on screen, with the cause typed there
    assert (made["item_id"], made["action"], made["source"], made["cause"]) == ("disputed", "adopt_annotator", "h1",
                                                                                "judge_wrong")
    assert made["unit_version"] == seen["version"] and made["blind"] is False


def test_enter_on_an_untouched_unit_saves_nothing(server):
    async def walk(ws) -> dict:  # type: ignore[no-untyped-def]
        page, url = await _signed_in(ws, server, unit_path(server, "disputed"))
        await page.value(COUNT_SUBMITS)
        seen = {"disabled": await page.value("document.getElementById('submit').disabled")}
        await page.press("Enter")  # nothing chosen
        seen["bare"] = await page.value("window.submits")
        seen["hint"] = await page.value("document.getElementById('submit-hint').className")
        await page.press("w")  # a cause alone is no decision
        await page.press("Enter")
        seen["cause_only"] = await page.value("JSON.stringify({submits: window.submits, url: location.href,"
                                              " cause: document.getElementById('cause-judge_wrong').checked})")
        await page.press("Enter", modifiers=2)  # Ctrl+Enter neither
        seen["ctrl"] = await page.value("window.submits")
        seen["url"] = url
        seen["errors"] = page.errors
        return seen

    seen = run(server, walk)
    assert seen["errors"] == [] and seen["disabled"] is True
    assert seen["bare"] == 0 and "error" in seen["hint"]
    assert json.loads(seen["cause_only"]) == {"submits": 0, "url": seen["url"], "cause": True}
    assert seen["ctrl"] == 0
    assert decisions(server) == []


def test_keys_typed_once_a_decision_is_submitted_act_on_no_unit(server):
    """Keys typed after Enter, before the next unit is on screen, are ignored: the browser takes the
    decision's submission as the page's last act. (They are sent as the page's script receives them,
    in the same task as the Enter: DevTools acknowledges a real key press only once the page it
    started has loaded, so real presses cannot be sent while a submission is on its way.)"""
    async def walk(ws) -> dict:  # type: ignore[no-untyped-def]
        page, url = await _signed_in(ws, server, unit_path(server, "disputed"))
        await page.value(COUNT_SUBMITS)
        await page.press("j")
        typed = ["Enter", "1", "w", "Enter", "s", "n", "h", "Enter"]  # submit, then keys meant for the next unit
        seen = {"held": await page.value(f"{json.dumps(typed)}.forEach({TYPE}), "
                                         "JSON.stringify({submits: window.submits, url: location.href,"
                                         " cause: !!document.querySelector('input[name=cause]:checked')})")}
        seen["next"] = await page.loaded(url)
        seen["next_untouched"] = await page.value("document.querySelector('input[name=action]:checked') === null")
        seen["url"] = url
        seen["errors"] = page.errors
        return seen

    seen = run(server, walk)
    assert seen["errors"] == []
    assert json.loads(seen["held"]) == {"submits": 1, "url": seen["url"], "cause": False}  # one submit, nothing after
    assert "item=split" in seen["next"] and seen["next_untouched"] is True
    assert [(d["item_id"], d["action"], d["cause"]) for d in decisions(server)] == [("disputed", "adopt_judge", None)]
