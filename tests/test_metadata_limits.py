"""Metadata travels with every verdict, so its depth and size are limited where items and labels are
validated: the CLI and the HTTP API refuse the same inputs (file:line and exit 2, or 422)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from framejudge.schema import MAX_METADATA_BYTES, MAX_METADATA_DEPTH, HumanLabel, Item
from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for

EXAMPLES = Path(__file__).parents[1] / "examples" / "items.jsonl"


def nested(depth: int) -> str:
    """A JSON object `depth` levels deep, as text (deeper than Python builds comfortably)."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def item_text(metadata: str, item_id: str = "x") -> str:
    return ('{"id": "%s", "turns": [{"question": "What colour?", "response_a": "Red."}], "metadata": %s}'
            % (item_id, metadata))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framejudge.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_depth_and_size_limits_on_the_models():
    Item.model_validate_json(item_text(nested(MAX_METADATA_DEPTH)))
    with pytest.raises(ValidationError, match=f"nested more than {MAX_METADATA_DEPTH} levels deep"):
        Item.model_validate_json(item_text(nested(MAX_METADATA_DEPTH + 1)))
    with pytest.raises(ValidationError, match="nested more than"):
        HumanLabel.model_validate({"item_id": "x", "annotator": "h",
                                   "metadata": {"b": json.loads(nested(MAX_METADATA_DEPTH))}})
    with pytest.raises(ValidationError, match=f"above the limit of {MAX_METADATA_BYTES}"):
        Item.model_validate_json(item_text(json.dumps({"note": "x" * MAX_METADATA_BYTES})))


@pytest.mark.parametrize("depth, words", [(255, "metadata: nested more than 32 levels deep"),
                                          (5000, "nested too deeply to read")])
def test_grade_refuses_deep_metadata_with_the_line(tmp_path, depth, words):
    items = tmp_path / "items.jsonl"
    items.write_text(item_text("{}", "ok") + "\n" + item_text(nested(depth)) + "\n")
    out = tmp_path / "v.jsonl"
    proc = cli("grade", str(items), "--out", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{items}:2: {words}" in proc.stderr
    assert not out.exists()


def test_calibrate_refuses_deep_label_metadata(tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"item_id": "x", "annotator": "h", "category_a": "Successful"}) + "\n"
                      + '{"item_id": "x", "annotator": "g", "metadata": %s}\n' % nested(300))
    proc = cli("calibrate", "--human", str(labels), "--judge", str(tmp_path / "v.jsonl"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{labels}:2: metadata: nested more than" in proc.stderr


def test_yaml_files_nested_too_deeply(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("id: x\nextra: " + "[" * 3000 + "]" * 3000 + "\n")
    for args in (["rubrics", "show", str(deep)], ["grade", str(EXAMPLES), "--out", str(tmp_path / "v.jsonl"), "--judges", str(deep)]):
        proc = cli(*args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert f"{deep}: nested too deeply to read" in proc.stderr


@pytest.fixture()
def client(tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=tmp_path, run_worker=False)
    engine = engine_for(settings.database_url)
    headers = {"Authorization": f"Bearer {create_key(engine, ['grade', 'calibrate'])}",
               "Content-Type": "application/json"}
    return TestClient(create_app(settings), raise_server_exceptions=False), headers


@pytest.mark.parametrize("depth", [40, 255, 3000])
def test_api_refuses_deep_metadata(client, depth):
    client, headers = client
    item = item_text(nested(depth))
    for body, kind in [('{"items": [%s]}' % item, "application/json"), (f"[{item}]", "application/json"),
                       (item_text("{}", "ok") + "\n" + item, "application/x-ndjson")]:
        r = client.post("/v1/jobs", content=body, headers={**headers, "Content-Type": kind})
        assert r.status_code == 422, r.text
        assert "nested" in r.json()["detail"]
    r = client.post("/v1/grade", content='{"item": %s}' % item, headers=headers)
    assert r.status_code in (400, 422) and r.status_code != 500, r.text  # too deep for the JSON parser: 400
    if depth < 1000:
        assert r.json()["detail"] == "item.metadata: nested more than 32 levels deep"
    label = '{"item_id": "x", "annotator": "h", "category_a": "Successful", "metadata": %s}' % nested(depth)
    r = client.post("/v1/calibrate", content='{"labels": [%s]}' % label, headers=headers)
    assert r.status_code in (400, 422), r.text
    if depth < 1000:
        assert "labels.0.metadata: nested more than 32 levels deep" in r.json()["detail"]


def test_api_refuses_options_nested_too_deeply(client):
    client, headers = client
    r = client.post("/v1/jobs", params={"options": nested(3000)}, content=f"[{item_text('{}')}]", headers=headers)
    assert r.status_code == 422 and "nested too deeply" in r.json()["detail"], r.text


def test_cli_and_api_agree_on_a_metadata_at_the_limit(client, tmp_path):
    client, headers = client
    item = item_text(nested(MAX_METADATA_DEPTH))
    (tmp_path / "items.jsonl").write_text(item + "\n")
    proc = cli("grade", str(tmp_path / "items.jsonl"), "--out", str(tmp_path / "v.jsonl"))
    assert proc.returncode == 0, proc.stderr
    [record] = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert record["metadata"] == json.loads(nested(MAX_METADATA_DEPTH))
    r = client.post("/v1/grade", content='{"item": %s}' % item, headers=headers)
    assert r.status_code == 200 and r.json()["records"][0]["metadata"] == record["metadata"]
