"""The HTML report, opened in a real headless Chromium (Debian's package) driven over the
DevTools protocol: tables and plots render, images decode, no console errors."""

from __future__ import annotations

import asyncio
import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

from framejudge.calibration.audit import audit, audit_slices, compare_runs, gold_shift
from framejudge.calibration.reliability import reliability
from framejudge.calibration.report import render_html, render_triage_html
from framejudge.calibration.triage import calibrate_triage
from tests.calibration.test_adjudication import gold_from
from tests.calibration.test_audit import synthetic

from tests.calibration.simulated import simulate
from tests.chromium import CHROMIUM, devtools_page


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    humans, judge, fields = synthetic(60, seed=3)
    for row in humans + judge:
        row.metadata["domain"] = "garden" if int(row.item_id[1:]) % 2 else "text"
    result = audit(humans, judge, fields, replicates=200)
    result.slices["domain"] = audit_slices(humans, judge, fields, "domain", replicates=100)
    comparison = compare_runs(humans, judge, judge, fields, replicates=100)
    result.gold = gold_shift(humans, judge, gold_from(humans, judge, humans_wrong=True)[0], fields, replicates=100)
    rows, _, verdicts = simulate(300, 3)
    result.reliability = reliability(rows, verdicts) + reliability(*simulate(20, 0, informative=False)[::2])
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_html(result, comparison), encoding="utf-8")
    return path


def test_report_is_self_contained(report_file):
    text = report_file.read_text()
    assert "<script" not in text and "http://" not in text and "https://" not in text
    assert text.count('src="data:image/png;base64,') >= 3
    for table_id in ("agreement", "each", "comparison", "gold", "disagreements"):
        assert f"id={table_id}" in text or f'id="{table_id}"' in text


async def _cdp(ws_url: str, url: str) -> dict:
    import aiohttp

    errors: list[str] = []
    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:
        counter = 0

        async def call(method: str, **params):
            nonlocal counter
            counter += 1
            my_id = counter
            await ws.send_json({"id": my_id, "method": method, "params": params})
            while True:
                msg = json.loads((await ws.receive()).data)
                if msg.get("method") in ("Runtime.exceptionThrown",):
                    errors.append(json.dumps(msg["params"])[:300])
                if msg.get("method") == "Runtime.consoleAPICalled" and msg["params"]["type"] == "error":
                    errors.append(json.dumps(msg["params"])[:300])
                if msg.get("method") == "Log.entryAdded" and msg["params"]["entry"]["level"] == "error":
                    errors.append(msg["params"]["entry"]["text"][:300])
                if msg.get("id") == my_id:
                    return msg.get("result", {})

        await call("Runtime.enable")
        await call("Log.enable")
        await call("Page.enable")
        await call("Emulation.setDeviceMetricsOverride", width=1280, height=2400, deviceScaleFactor=1, mobile=False)
        await call("Page.navigate", url=url)
        for _ in range(100):
            state = await call("Runtime.evaluate", expression="document.readyState", returnByValue=True)
            if state["result"]["value"] == "complete":
                break
            await asyncio.sleep(0.1)
        probe = await call("Runtime.evaluate", returnByValue=True, expression="""JSON.stringify({
            images: [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]),
            plots: [...document.images].map(i => i.className),
            thresholds: [...document.querySelectorAll('#thresholds tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
            reliability: [...document.querySelectorAll('#reliability tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
            rows: document.querySelectorAll('#agreement tbody tr').length,
            tables: document.querySelectorAll('table').length,
            gold: [...document.querySelectorAll('#gold tr')].map(r => [...r.cells].map(c => c.textContent)),
            headings: [...document.querySelectorAll('h2')].map(h => h.textContent),
            heading: document.querySelector('h1').textContent})""")
        shot = await call("Page.captureScreenshot", format="png")
        return {"probe": json.loads(probe["result"]["value"]), "png": base64.b64decode(shot["data"]), "errors": errors}


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package 'chromium')")
def test_report_renders_in_headless_chromium(report_file):
    with devtools_page() as ws:
        got = asyncio.run(_cdp(ws, report_file.as_uri()))
    assert got["errors"] == []
    probe = got["probe"]
    assert probe["heading"] == "framejudge calibration"
    assert probe["rows"] == 1 and probe["tables"] >= 6
    assert "Against the adjudicated gold: before and after" in probe["headings"]
    header, row = probe["gold"]
    assert header[:4] == ["field", "before: alpha vs majority", "after: alpha vs gold", "difference [95% CI]"]
    assert header[-1] == "units changed" and row[0] == "category_a" and int(row[-1]) > 0
    assert row[3].startswith("+")  # the reviewer sided with the judge: its figure rises
    assert len(probe["images"]) >= 3 and all(ok and w > 100 and h > 50 for ok, w, h in probe["images"])
    shot = np.asarray(Image.open(io.BytesIO(got["png"])).convert("L"), dtype=float)
    assert shot.shape[1] == 1280
    assert shot.std() > 10  # not a blank page: text, tables and plots are drawn


@pytest.fixture(scope="module")
def triage_file(tmp_path_factory):
    rows, _, verdicts = simulate(400, 2)
    path = tmp_path_factory.mktemp("triage") / "triage.html"
    path.write_text(render_triage_html(calibrate_triage(rows, verdicts, 0.9, 0.1)), encoding="utf-8")
    return path


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package 'chromium')")
def test_reliability_diagram_and_coverage_curve_are_drawn(report_file, triage_file):
    with devtools_page() as ws:
        audit_page = asyncio.run(_cdp(ws, report_file.as_uri()))
        triage_page = asyncio.run(_cdp(ws, triage_file.as_uri()))
    assert audit_page["errors"] == [] and triage_page["errors"] == []
    probe = audit_page["probe"]
    assert "Confidence against agreement (reliability)" in probe["headings"]
    assert probe["plots"].count("reliability-plot") == 1  # the informative field only
    informative, flat = probe["reliability"]
    assert informative[0] == "category_a" and float(informative[2]) < 0.1
    assert "not informative" in flat
    probe = triage_page["probe"]
    assert probe["plots"].count("coverage-plot") == 1 and probe["plots"].count("reliability-plot") == 1
    assert all(ok and w > 300 and h > 200 for ok, w, h in probe["images"])
    [row] = probe["thresholds"]
    assert row[0] == "category_a" and row[2] == "90.0%" and row[1] != "none"
    shot = np.asarray(Image.open(io.BytesIO(triage_page["png"])).convert("L"), dtype=float)
    assert shot.std() > 10
