"""A key reaches what its scopes name and no further: a review queue shows only the videos its
own key may reach (a review-only key's queue, only what that key's own jobs graded: no media-root
video it never graded, no URL fetched on its behalf), and the API reference's table of the scope
each route needs is the app's routes and their dependencies, route for route. The real app on
SQLite, a real video in its media root, and a loopback web server counting what it is asked for."""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from framejudge.service.context import KeyWith
from framejudge.service.review.sessions import SignedIn
from framejudge.service.store import create_key
from tests.service.test_review import ITEMS, review_app, sign_in

ROOT = Path(__file__).resolve().parents[2]
FRAME = 'src="data:image/jpeg;base64,'


@pytest.fixture()
def video_server(tmp_path) -> Iterator[tuple[Path, str, list[str]]]:
    """A web server on loopback serving a folder; the paths it was asked for."""
    asked: list[str] = []

    class Counting(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    (tmp_path / "site").mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Counting, directory=str(tmp_path / "site")))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield tmp_path / "site", f"http://127.0.0.1:{server.server_address[1]}", asked
    server.shutdown()
    server.server_close()


def _to_review(env: dict[str, Any], item: dict[str, Any]) -> list[dict[str, Any]]:
    """The reference judge's verdicts on `item`, marked to_review by its own triage thresholds."""
    grader = create_key(env["engine"], ["grade"], "grader")
    got = env["client"].post("/v1/grade", json={"item": item, "options": {"triage": "default"}},
                             headers={"Authorization": f"Bearer {grader}"})
    assert got.status_code == 200, got.text
    records = got.json()["records"]
    assert all(r["triage"]["decision"] == "to_review" for r in records)
    return records


def _unit_page(env: dict[str, Any], scopes: list[str], item: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """A review queue made by a key of these scopes from `records` and `item`; its unit page, as
    that key sees it signed in."""
    client = env["client"]
    key = create_key(env["engine"], scopes, "+".join(scopes))
    made = client.post("/v1/reviews", json={"verdicts": records, "items": [item]},
                       headers={"Authorization": f"Bearer {key}"})
    assert made.status_code == 201, made.text
    client.cookies.clear()
    assert sign_in(client, key).status_code == 303
    page = client.get(f"/review/{made.json()['id']}/unit", params={"item": item["id"]})
    assert page.status_code == 200, page.text
    return page.text


def test_a_review_only_key_gets_no_frames_of_a_video_it_never_graded_and_no_fetch(tmp_path, video_server):
    site, base, asked = video_server
    with review_app(tmp_path, url_hosts=[base.split("://", 1)[1]], url_allow_private=True) as env:  # host:port
        (site / "c.mp4").write_bytes((env["media"] / "c.mp4").read_bytes())
        item = ITEMS[0]  # names c.mp4 in the media root
        records = _to_review(env, item)
        at_url = {**item, "video": f"{base}/c.mp4"}

        refused = _unit_page(env, ["review"], item, records)
        assert FRAME not in refused
        assert ("c.mp4: a queue made by a key without the grade or calibrate scope shows only the videos that "
                "key&#39;s own jobs graded") in refused
        refused = _unit_page(env, ["review"], at_url, records)
        assert FRAME not in refused and asked == []  # the server fetched nothing for it
        calibrating = _unit_page(env, ["calibrate", "review"], at_url, records)
        assert FRAME not in calibrating and "fetching a video URL needs the grade scope" in calibrating
        assert asked == []

        # still allowed: the media root for a calibrate key, anything POST /v1/frames takes for a grade key
        assert _unit_page(env, ["calibrate", "review"], item, records).count(FRAME) == 8
        assert _unit_page(env, ["grade", "review"], item, records).count(FRAME) == 8
        assert _unit_page(env, ["grade", "review"], at_url, records).count(FRAME) == 8
        assert asked == ["/c.mp4"]


def test_the_videos_a_keys_own_jobs_graded_are_found_by_its_reference_and_only_for_it(tmp_path):
    """What a review-only key's queue may show: the server path a job of that key graded under the
    client's reference; nothing for another key, another reference, or a job not yet graded."""
    import time

    from framejudge.service.review.frames import graded_video

    with review_app(tmp_path, run_worker=True) as env:
        key = create_key(env["engine"], ["grade"])
        auth = {"Authorization": f"Bearer {key}"}
        job = env["client"].post("/v1/jobs", json=ITEMS[:1], headers=auth).json()["id"]
        deadline = time.monotonic() + 120
        while env["client"].get(f"/v1/jobs/{job}", headers=auth).json()["state"] != "done":
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.05)
        found = graded_video(env["engine"], key.split("_")[1], "c.mp4")
        assert found is not None and found.resolve() == (env["media"] / "c.mp4").resolve()
        other = create_key(env["engine"], ["review"])
        assert graded_video(env["engine"], other.split("_")[1], "c.mp4") is None
        assert graded_video(env["engine"], key.split("_")[1], "other.mp4") is None


# ------------------------------------------------------------------ the scope table of the API reference

def _needs(route: APIRoute) -> str:
    """What a route needs, read from its dependencies (KeyWith and the review pages' SignedIn carry
    their scopes): 'none', 'metrics (optional)', 'review (signed in)', or the scopes joined by ' or '."""
    found: list[str] = []

    def walk(dependant: Any) -> None:
        for dep in dependant.dependencies:
            if isinstance(dep.call, KeyWith):
                found.append(" or ".join(dep.call.scopes) + (" (optional)" if dep.call.optional else ""))
            elif isinstance(dep.call, SignedIn):
                found.append(" or ".join(dep.call.scopes) + " (signed in)"
                             + "".join(f" and {scope}" for scope in dep.call.also))
            walk(dep)

    walk(route.dependant)
    assert len(set(found)) <= 1, (route.path, found)
    return found[0] if found else "none"


def _documented() -> dict[tuple[str, str], str]:
    text = (ROOT / "docs" / "http-api.md").read_text()
    section = text.split("## Scopes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z]+) ([^`]+)` \| ([^|]+?) \|", section, re.M)
    table: dict[tuple[str, str], str] = {}
    for method, path, needs in rows:
        assert (method, path) not in table, f"{method} {path} is listed twice"
        table[(method, path)] = needs.replace("`", "").strip()
    return table


def test_the_api_reference_says_which_scope_each_route_needs(tmp_path):
    with review_app(tmp_path) as env:
        app = env["client"].app
        actual = {(method, context.path): _needs(context.route) for context in iter_route_contexts(app.routes)
                  if isinstance(context.route, APIRoute) for method in sorted(context.methods or ())}
    documented = _documented()
    assert sorted(set(actual) - set(documented)) == [], "routes missing from the table in docs/http-api.md"
    assert sorted(set(documented) - set(actual)) == [], "the table in docs/http-api.md lists routes the app lacks"
    wrong = {route: (documented[route], needs) for route, needs in actual.items() if documented[route] != needs}
    assert wrong == {}, "(documented, actual)"
    # what the reference's table says is what the server does: a key of another scope is refused
    assert actual[("POST", "/v1/frames")] == "grade" and actual[("POST", "/v1/reviews")] == "review or calibrate"
