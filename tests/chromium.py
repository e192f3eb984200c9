"""A real headless Chromium for page tests, driven over its DevTools protocol on loopback."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@contextmanager
def devtools_page(*flags: str) -> Iterator[str]:
    """Start Chromium headless (with extra `flags`) and yield its blank page's DevTools
    websocket URL; the browser and its profile are gone afterwards."""
    assert CHROMIUM is not None
    profile = tempfile.mkdtemp()
    proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                             "--disable-background-networking", "--disable-component-update", "--disable-sync",
                             *flags, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        assert proc.stderr is not None
        for line in proc.stderr:
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
                break
        assert port, "Chromium did not start its DevTools endpoint"
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        yield next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"]
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


class Page:
    """One page of a DevTools session: navigate, evaluate, press keys; page errors are collected."""

    def __init__(self, ws) -> None:  # type: ignore[no-untyped-def]
        self.ws, self.counter, self.errors = ws, 0, []

    async def call(self, method: str, **params):  # type: ignore[no-untyped-def]
        self.counter += 1
        my_id = self.counter
        await self.ws.send_json({"id": my_id, "method": method, "params": params})
        while True:
            msg = json.loads((await self.ws.receive()).data)
            if msg.get("method") == "Runtime.exceptionThrown":
                self.errors.append(json.dumps(msg["params"])[:300])
            if msg.get("method") == "Log.entryAdded" and msg["params"]["entry"]["level"] == "error":
                self.errors.append(msg["params"]["entry"]["text"][:300])
            if msg.get("id") == my_id:
                return msg.get("result", {})

    async def start(self) -> None:
        for domain in ("Runtime", "Log", "Page"):
            await self.call(f"{domain}.enable")

    async def value(self, expression: str):  # type: ignore[no-untyped-def]
        got = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return got.get("result", {}).get("value")

    async def loaded(self, previous: str | None = None) -> str:
        """Wait until a page other than `previous` has loaded; its URL."""
        import asyncio

        for _ in range(300):
            url = await self.value("document.readyState === 'complete' ? location.href : ''")
            if url and url != previous:
                return url
            await asyncio.sleep(0.05)
        raise AssertionError(f"no page loaded after {previous}")

    async def go(self, url: str) -> str:
        await self.call("Page.navigate", url=url)
        return await self.loaded()

    async def press(self, key: str, code: str | None = None, modifiers: int = 0) -> None:
        text = key if len(key) == 1 else ("\r" if key == "Enter" else "")
        params = {"key": key, "code": code or (f"Key{key.upper()}" if key.isalpha() and len(key) == 1 else
                                               f"Digit{key}" if key.isdigit() else key),
                  "modifiers": modifiers, "windowsVirtualKeyCode": {"Enter": 13, "Escape": 27}.get(key, ord(key.upper()[0]))}
        await self.call("Input.dispatchKeyEvent", type="keyDown", text=text, **params)
        await self.call("Input.dispatchKeyEvent", type="keyUp", **params)
