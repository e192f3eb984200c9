"""What a request says is read as it is written, or refused naming the place: a JSON key given
twice, NaN, a number written as a string, a query parameter given twice. Against the real app
and a real SQLite file."""

from __future__ import annotations

import json

import pytest

from framejudge.service.store import create_key, engine_for
from tests.service.test_validation import ITEM, TURN, api_client


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with api_client(tmp_path_factory.mktemp("inputs"), raise_server_exceptions=False) as client:
        yield client


def problem(r, status: int = 422) -> str:
    assert r.status_code == status and r.headers["content-type"] == "application/problem+json", r.text[:300]
    return r.json()["detail"]


def post_json(api, path: str, text: str, **kw):
    return api.post(path, content=text.encode(), headers={"Content-Type": "application/json"}, **kw)


@pytest.mark.parametrize("path", ["/v1/grade", "/v1/calibrate", "/v1/frames"])
def test_a_json_key_given_twice_is_refused_not_the_last_one_kept(api, path):
    body = '{"item": {"id": "a", "id": "b", "turns": [%s]}, "video": "c.mp4"}' % json.dumps(TURN)
    assert problem(post_json(api, path, body)) == "body: key 'id' given twice"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json_numbers(api, constant):
    body = '{"item": {"id": "a", "task_type": "multi_turn", "turns": [%s]}}' % json.dumps({**TURN, "time": 1.0})
    assert post_json(api, "/v1/grade", body).status_code == 200
    assert problem(post_json(api, "/v1/grade", body.replace("1.0", constant))) == f"body: {constant} is not a JSON number"


def test_job_bodies_options_and_jsonl_lines_are_read_as_strictly(api):
    twice = '{"items": [%s], "items": []}' % json.dumps(ITEM)
    assert problem(post_json(api, "/v1/jobs", twice)) == "body: key 'items' given twice"
    line = json.dumps(ITEM).replace('"id": "a"', '"id": "a", "id": "b"')
    r = api.post("/v1/jobs", content=(line + "\n").encode(), headers={"Content-Type": "application/x-ndjson"})
    assert problem(r) == "JSONL line 1: key 'id' given twice"
    r = api.post("/v1/jobs", params={"options": '{"samples": 1, "samples": 2}'}, json=[ITEM])
    assert problem(r) == "options: key 'samples' given twice"
    r = api.post("/v1/jobs", params={"options": '{"sample_temperature": NaN}'}, json=[ITEM])
    assert problem(r) == "options: NaN is not a JSON number"
    assert api.post("/v1/jobs", params={"options": '{"samples": 1}'}, json=[ITEM]).status_code == 202


@pytest.mark.parametrize("where, value, field", [
    ("time", "3", "item.turns.0.time"), ("time", True, "item.turns.0.time"),
    ("samples", "1", "options.samples"), ("blind", "false", "options.blind"), ("n", "4", "options.sampler.n"),
])
def test_a_number_or_a_switch_written_as_a_string_is_not_read_as_one(api, where, value, field):
    if where == "time":
        body = {"item": {"id": "a", "task_type": "multi_turn", "turns": [{**TURN, "time": value}]}}
    elif where == "n":
        body = {"item": ITEM, "options": {"sampler": {"n": value}}}
    else:
        body = {"item": ITEM, "options": {where: value}}
    detail = problem(api.post("/v1/grade", json=body))
    assert detail.startswith(f"{field}: Input should be a valid "), detail
    # the same values as JSON has them are fine
    fine = {"time": 3, "samples": 1, "blind": False, "n": 4}[where]
    assert api.post("/v1/grade", json=json.loads(json.dumps(body).replace(json.dumps(value), json.dumps(fine),
                                                                             1))).status_code == 200


def test_a_query_parameter_given_twice_is_refused_not_the_last_one_taken(api):
    r = api.get("/v1/jobs/0123456789abcdef/verdicts?limit=5&limit=1000")
    assert problem(r) == "query.limit: given 2 times; give it once"
    r = api.post("/v1/jobs?judge=reference&judge=reference", json=[ITEM])
    assert problem(r) == "query.judge: given 2 times; give it once"
    assert api.post("/v1/jobs?judge=reference", json=[ITEM]).status_code == 202


def test_metrics_name_the_route_of_static_files_the_schema_and_bodies_refused_before_routing(tmp_path):
    with api_client(tmp_path) as client:
        scraper = create_key(engine_for(f"sqlite:///{tmp_path / 'db.sqlite'}"), ["metrics"])
        assert client.get("/review/static/review.css").status_code == 200
        assert client.get("/openapi.json").status_code == 200
        too_large = client.post("/v1/grade", content=b" " * (65 * 1024**2), headers={"Content-Type": "application/json"})
        assert too_large.status_code == 413
        assert client.delete("/healthz").status_code == 405
        assert client.get("/no/such/path").status_code == 404
        text = client.get("/metrics", headers={"Authorization": f"Bearer {scraper}"}).text
    for route, method, status in (("/review/static", "GET", 200), ("/openapi.json", "GET", 200),
                                  ("/v1/grade", "POST", 413), ("/healthz", "DELETE", 405), ("unmatched", "GET", 404)):
        assert f'framejudge_http_requests_total{{method="{method}",route="{route}",status="{status}"}} 1.0' in text
    assert 'route="unmatched",status="200"' not in text
