"""The leaderboard page, opened in a real headless Chromium over the DevTools protocol: plots
decode, the table and the footnote are there, no console errors, nothing external."""

from __future__ import annotations

import asyncio
import base64
import io

import numpy as np
import pytest
from PIL import Image

from framejudge.leaderboard.page import render_board_html
from framejudge.leaderboard.stats import build_board
from tests.chromium import CHROMIUM, Page, devtools_page
from tests.leaderboard.simulated import battle, simulate


@pytest.fixture(scope="module")
def board():
    out = simulate({"base": 0.0, "long": 0.0, "good": 0.4, "bad": -0.5},
                   [("long", "base"), ("good", "base"), ("bad", "base"), ("good", "long")], 150, seed=5,
                   length_mean={"long": 500}, length_bias=1.2, videos=150)
    for k, b in enumerate(out):
        b.domain = ["garden", "kitchen", "street"][k % 3]
        b.swap_consistent = k % 5 != 0
    out += [battle("zero", "base", "B", item=f"z{k}", domain="garden") for k in range(20)]
    out += [battle("<i>C</i>", "D", "A" if k % 3 else "B", item=f"c{k}", domain="street") for k in range(30)]
    return build_board(out, baseline="base", replicates=100, by=["domain"])


@pytest.fixture(scope="module")
def page_file(board, tmp_path_factory):
    path = tmp_path_factory.mktemp("leaderboard") / "leaderboard.html"
    path.write_text(render_board_html(board), encoding="utf-8")
    return path


def test_page_is_self_contained_and_escaped(page_file):
    text = page_file.read_text()
    assert "<script" not in text and "http://" not in text and "https://" not in text
    assert text.count('src="data:image/png;base64,') == 3  # strengths, win rates, one heatmap
    assert "<i>C</i>" not in text and "&lt;i&gt;C&lt;/i&gt;" in text


async def _probe(ws_url: str, url: str) -> dict:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:
        page = Page(ws)
        await page.start()
        await page.call("Emulation.setDeviceMetricsOverride", width=1280, height=2400, deviceScaleFactor=1, mobile=False)
        await page.go(url)
        probe = await page.value("""({
            images: [...document.images].map(i => [i.id || i.className, i.complete, i.naturalWidth, i.naturalHeight]),
            header: [...document.querySelectorAll('#leaderboard thead th')].map(c => c.textContent),
            rows: [...document.querySelectorAll('#leaderboard tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
            slices: document.querySelectorAll('table.slices tbody tr').length,
            footnote: document.querySelector('#footnote').textContent,
            headings: [...document.querySelectorAll('h2')].map(h => h.textContent)})""")
        shot = await page.call("Page.captureScreenshot", format="png")
        return {"probe": probe, "png": base64.b64decode(shot["data"]), "errors": page.errors}


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package 'chromium')")
def test_page_renders_in_headless_chromium(board, page_file):
    with devtools_page() as ws:
        got = asyncio.run(_probe(ws, page_file.as_uri()))
    assert got["errors"] == []
    probe = got["probe"]
    kinds = [i[0] for i in probe["images"]]
    assert kinds == ["strength-plot", "win-rate-plot", "slice-heatmap"]
    assert all(ok and w > 300 and h > 150 for _, ok, w, h in probe["images"])
    assert probe["headings"][:3] == ["Strengths", "Win rates against the baseline", "The judge's biases on this run"]
    assert "By domain" in probe["headings"]
    assert probe["header"][:3] == ["model", "part", "battles"] and "length-controlled" in probe["header"]
    rows = {r[0]: r for r in probe["rows"]}
    assert list(rows) == [r.model for r in board.models]
    assert rows["base"][4] == "baseline"
    assert rows["zero"][-1] == "5: 100%" and "lost every graded battle" in rows["zero"][10]
    assert rows["long"][9].startswith(f"{100 * next(r for r in board.models if r.model == 'long').vs_baseline.win_rate.estimate:.1f}%")
    assert probe["slices"] == sum(len(b.models) for b in board.slices["domain"].values())
    foot = probe["footnote"]
    assert "Position consistency:" in foot and "(80.0%)" in foot
    assert "Length effect: the length regressions' coefficient (the models' inverse-variance weighted mean) is +" in foot
    assert "cannot be ranked against each other" in foot and "{<i>C</i>, D}" in foot
    assert "Never won a battle: zero" in foot
    shot = np.asarray(Image.open(io.BytesIO(got["png"])).convert("L"), dtype=float)
    assert shot.shape[1] == 1280 and shot.std() > 10


def test_a_degenerate_interval_holds_its_estimate_and_the_page_draws_it():
    # every battle on one video: every replicate draws the same battles, so each interval is one
    # value; the replicates' fits (warm-started) differ from the point fit in the ninth decimal
    out = [battle("a", "b", "A", item="x", video="v"), battle("b", "c", "A", item="y", video="v"),
           battle("a", "c", "Both", item="z", video="v"), battle("c", "a", "B", item="w", video="v")]
    board = build_board(out, replicates=20)
    intervals = [r.strength for r in board.models] + [r.successful for r in board.models] + \
        [iv for r in board.models if r.vs_baseline for iv in (r.vs_baseline.win_rate, r.vs_baseline.length_controlled)]
    assert any(iv.low is not None and iv.low == iv.high for iv in intervals)  # degenerate ones are there
    for iv in intervals:
        assert iv.estimate is None or iv.low is None or iv.low <= iv.estimate <= iv.high
    text = render_board_html(board)
    assert 'id="strength-plot"' in text and "a</td>" in text
    # a board stored before (its strength's bounds just below the estimate) reads back holding it
    stored = board.model_dump(mode="json")
    s = stored["models"][0]["strength"]
    s["low"] = s["high"] = s["estimate"] - 1e-9
    again = type(board).model_validate(stored)
    assert again.models[0].strength.low <= again.models[0].strength.estimate <= again.models[0].strength.high
    render_board_html(again)
