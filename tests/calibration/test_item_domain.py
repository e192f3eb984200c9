"""An item's own `domain` slices a calibration (`calibrate --by domain`), with no domain column in the labels."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from framejudge import grade
from framejudge.cli import app

TURN = {"question": "What colour is the car?", "golden": "The car is red.", "response_a": "The car is red.",
        "response_b": "It is blue."}


def test_calibrate_by_domain_sees_the_items_own_domain(tmp_path):
    items = [{"id": f"i{k}", "domain": "cars" if k < 3 else "signs", "turns": [TURN]} for k in range(6)]
    items.append({"id": "plain", "turns": [TURN]})  # no domain: in no slice
    verdicts = tmp_path / "verdicts.jsonl"
    records = grade(items, out=verdicts, options={"cache": False})
    assert [r.domain for r in records] == ["cars"] * 3 + ["signs"] * 3 + [None]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": it["id"], "turn": 0, "annotator": who, "category_a": "Successful",
                                          "category_b": "Not Successful", "preference": "A"}) + "\n"
                              for it in items for who in ("h1", "h2")))
    out = tmp_path / "result.json"
    run = CliRunner().invoke(app, ["calibrate", "--human", str(labels), "--judge", str(verdicts), "--by", "domain",
                                   "--replicates", "20", "--out", str(out)])
    assert run.exit_code == 0, run.output
    slices = json.loads(out.read_text())["slices"]["domain"]
    assert sorted(slices) == ["cars", "signs"]
    assert {name: s["fields"][0]["units"] for name, s in slices.items()} == {"cars": 3, "signs": 3}
