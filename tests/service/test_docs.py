"""/docs works offline: Swagger UI's files come from the installed package, not a CDN. Checked in
a real headless Chromium (Debian's package) against a real uvicorn server on loopback, with every
other host unresolvable: the operations render and no request leaves the server."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from fastapi.testclient import TestClient

from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from tests.chromium import CHROMIUM, devtools_page
from tests.service.servers import uvicorn_server


@pytest.fixture()
def settings(tmp_path):
    return Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                    run_worker=False)


def test_docs_page_names_only_local_assets_and_redoc_is_off(settings):
    with TestClient(create_app(settings)) as client:
        page = client.get("/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "http://" not in page.text and "https://" not in page.text
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources and all(s.startswith("/docs/assets/") for s in sources), sources
        for source in sources:
            asset = client.get(source)
            assert asset.status_code == 200 and len(asset.content) > 500, source
        assert client.get("/redoc").status_code == 404  # not offered (it would need a CDN too)


@pytest.fixture()
def server(settings):
    with uvicorn_server(create_app(settings)) as url:
        yield url


async def _open(ws_url: str, url: str) -> dict:
    import aiohttp

    requests: list[str] = []
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
                if msg.get("method") == "Network.requestWillBeSent":
                    requests.append(msg["params"]["request"]["url"])
                if msg.get("method") in ("Runtime.exceptionThrown", "Network.loadingFailed"):
                    errors.append(json.dumps(msg["params"])[:300])
                if msg.get("id") == my_id:
                    return msg.get("result", {})

        for domain in ("Runtime", "Network", "Page"):
            await call(f"{domain}.enable")
        await call("Page.navigate", url=url)
        probe: dict = {}
        for _ in range(200):  # until Swagger UI has drawn the operations (or 20 s)
            got = await call("Runtime.evaluate", returnByValue=True, expression="""JSON.stringify({
                operations: document.querySelectorAll('.opblock').length,
                title: (document.querySelector('.info .title') || {}).textContent || null})""")
            probe = json.loads(got["result"]["value"])
            if probe["operations"]:
                break
            await asyncio.sleep(0.1)
        return {"probe": probe, "requests": requests, "errors": errors}


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package 'chromium')")
def test_docs_render_offline_in_headless_chromium(server):
    # offline: no host but loopback resolves
    with devtools_page("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1") as ws:
        got = asyncio.run(_open(ws, f"{server}/docs"))
    assert got["errors"] == []
    elsewhere = [u for u in got["requests"] if not u.startswith(server + "/") and not u.startswith("data:")]
    assert elsewhere == []
    assert f"{server}/openapi.json" in got["requests"]
    assert got["probe"]["operations"] >= 10 and got["probe"]["title"].startswith("framejudge")
