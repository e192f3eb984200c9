"""The documentation site (mkdocs.yml, docs/) builds with warnings as errors, and reads offline: no
script, style sheet, font or icon from another host."""
import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.chromium import CHROMIUM, Page, devtools_page

ROOT = Path(__file__).resolve().parents[1]
REMOTE = re.compile(r"^(https?:)?//", re.IGNORECASE)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="the docs site needs the docs extra: pip install -e '.[docs]'")


class Assets(HTMLParser):
    """The addresses a page loads: scripts, style sheets, fonts, icons, preconnects, images."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in ("script", "img", "iframe", "source") and found.get("src"):
            self.loaded.append(found["src"] or "")
        if tag == "link" and found.get("href") and (found.get("rel") or "") != "canonical":
            self.loaded.append(found["href"] or "")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    ran = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True,
                         timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return out


def test_the_site_builds_strictly_with_every_page(site):
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    for doc in (ROOT / "docs").rglob("*.md"):
        assert doc.relative_to(ROOT / "docs").with_suffix(".html").as_posix() in pages, doc


def test_no_page_loads_a_script_style_or_font_from_another_host(site):
    remote = []
    for page in site.rglob("*.html"):
        parser = Assets()
        parser.feed(page.read_text(encoding="utf-8"))
        remote += [f"{page.relative_to(site)}: {url}" for url in parser.loaded if REMOTE.match(url.strip())]
    assert not remote, remote


def test_no_style_sheet_imports_from_another_host(site):
    remote = []
    for sheet in site.rglob("*.css"):
        text = re.sub(r"/\*.*?\*/", "", sheet.read_text(encoding="utf-8"), flags=re.DOTALL)  # licence comments
        urls = re.findall(r"url\(\s*['\"]?([^'\")]+)", text) + re.findall(r"@import\s+['\"]([^'\"]+)", text)
        remote += [f"{sheet.relative_to(site)}: {url}" for url in urls if REMOTE.match(url.strip())]
    assert not remote, remote


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package 'chromium')")
def test_search_answers_from_the_file_system(site):
    """The site opened from file:// as the README says: typing in the search box lists the pages that
    name the word (a browser refuses a web worker from file://; the vendored shim stands in for it)."""
    import aiohttp

    async def search(ws_url: str, word: str) -> dict:
        async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:
            page = Page(ws)
            await page.start()
            await page.go((site / "index.html").as_uri())
            await page.value(f"""(() => {{ document.querySelector('label[for=__search]').click();  // the search field, as a click opens it
                const box = document.querySelector('input[data-md-component=search-query]'); box.focus(); box.value = {json.dumps(word)};
                box.dispatchEvent(new Event('input', {{bubbles: true}})); box.dispatchEvent(new KeyboardEvent('keyup'));
                return true; }})()""")
            for _ in range(400):  # until the worker has answered (the index is built in it first)
                found = await page.value("""[...document.querySelectorAll('.md-search-result__item a')]
                                            .map(a => a.getAttribute('href'))""")
                meta = await page.value("document.querySelector('.md-search-result__meta')?.textContent || ''")
                if found or "No matching" in meta:
                    break
                await asyncio.sleep(0.05)
            return {"found": found, "meta": meta, "errors": page.errors}

    with devtools_page() as ws_url:
        got = asyncio.run(search(ws_url, "flex"))
    assert not [e for e in got["errors"] if "iframe-worker" in e or "Worker" in e], got["errors"]
    pages = {href.split("#")[0].removeprefix(site.as_uri() + "/") for href in got["found"]}
    assert "getting-started/openai.html" in pages, got
