"""`framejudge align` on the guideline's labelled examples with the reference judge, and the
input it refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from framejudge.rubrics import get_rubric, load_rubric
from tests.rubrics.test_align import BASE_HASH, guideline_files


def cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framejudge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]),
                                                     "COLUMNS": "200"})


def refused(proc: subprocess.CompletedProcess[str], words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "error:" in proc.stderr and words in proc.stderr, proc.stderr


@pytest.fixture()
def guideline(shared_dir, tmp_path) -> tuple[Path, Path]:
    return guideline_files(shared_dir, tmp_path)


def test_align_writes_a_rubric_that_grade_uses(guideline, tmp_path):
    items, labels = guideline
    rubric, report = tmp_path / "my-rubric.yaml", tmp_path / "result.json"
    proc = cli("align", "--rubric", "video-qa", "--labels", labels, "--items", items, "--out", rubric,
               "--report", report, "--replicates", 200)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(report.read_text())
    new = load_rubric(rubric)
    assert (new.id, new.version, new.content_hash) == (result["rubric_id"], "1.2.0", result["rubric_hash"])
    assert new.content_hash != BASE_HASH and result["base_rubric_hash"] == BASE_HASH
    assert [c.item_id for c in new.corrections] == [u["item_id"] for u in result["corrections"]]
    n_ex, n_held = len(result["example_units"]), len(result["held_apart_units"])
    assert n_ex + n_held == 42 and n_held == len(result["held_apart_items"]) == 21
    assert not {c.item_id for c in new.corrections} & set(result["held_apart_items"])
    assert f"wrote {rubric}" in proc.stdout and new.content_hash in proc.stdout
    assert f"examples: {n_ex} unit(s) of {n_ex} item(s); held apart: {n_held} unit(s) of {n_held} item(s)" in proc.stdout
    assert "category_a" in proc.stdout and "difference [95% CI]" in proc.stdout
    for what, units in (("examples", n_ex), ("held apart, base rubric", n_held), ("held apart, aligned rubric", n_held)):
        assert f"progress ({what}): done: {units}/{units} turn(s) (100%), " in proc.stderr, proc.stderr
    [cat_a] = [c for c in result["comparison"] if c["field"] == "category_a"]
    assert cat_a["replicates"] == 200 and cat_a["low"] is not None
    assert get_rubric("video-qa").content_hash == BASE_HASH

    verdicts = tmp_path / "verdicts.jsonl"
    graded = cli("grade", items, "--rubric", rubric, "--out", verdicts)
    assert graded.returncode == 0, graded.stderr
    for line in verdicts.read_text().splitlines():
        prov = json.loads(line)["provenance"]
        assert (prov["rubric_id"], prov["rubric_version"], prov["rubric_hash"]) == ("video-qa", "1.2.0", new.content_hash)


def test_align_from_verdicts_matches_grading_now(guideline, tmp_path):
    items, labels = guideline
    verdicts = tmp_path / "base.jsonl"
    assert cli("grade", items, "--out", verdicts).returncode == 0
    now, given = tmp_path / "now.json", tmp_path / "given.json"
    assert cli("align", "--labels", labels, "--items", items, "--out", tmp_path / "a.yaml", "--report", now,
               "--replicates", 50).returncode == 0
    proc = cli("align", "--labels", labels, "--items", items, "--verdicts", verdicts, "--out", tmp_path / "b.yaml",
               "--report", given, "--replicates", 50)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(now.read_text())["corrections"] == json.loads(given.read_text())["corrections"]


def test_align_refuses_bad_input(guideline, tmp_path):
    items, labels = guideline
    rubric = tmp_path / "taken.yaml"
    rubric.write_text("already here")
    refused(cli("align", "--labels", labels, "--items", items, "--out", rubric), "the file exists")
    assert rubric.read_text() == "already here"
    refused(cli("align", "--labels", labels, "--items", items, "--out", tmp_path / "r.json"), "ends in .yaml")
    strangers = tmp_path / "strangers.jsonl"
    strangers.write_text(json.dumps({"item_id": "nobody", "annotator": "lead", "category_a": "Missing"}) + "\n")
    refused(cli("align", "--labels", strangers, "--items", items, "--out", tmp_path / "n.yaml"),
            "no labelled unit names an item")
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"item_id": "trains-1", "annotator": "lead", "category_a": "Missing"}) + "\n")
    refused(cli("align", "--labels", one, "--items", items, "--out", tmp_path / "o.yaml"), "too few to split")
    refused(cli("align", "--labels", labels, "--items", items, "--out", tmp_path / "h.yaml", "--holdout", "1"),
            "--holdout 1.0")
    refused(cli("align", "--labels", labels, "--items", items, "--out", tmp_path / "b.yaml", "--budget-tokens", "5"),
            "none of the")
    refused(cli("align", "--labels", labels, "--items", items, "--out", tmp_path / "m.yaml", "--rubric", "mcq-letter"),
            "needs a video_qa rubric")
    refused(cli("align", "--labels", labels, "--items", items, "--out", tmp_path / "v.yaml", "--verdicts",
                tmp_path / "none.jsonl"), "no such verdicts file")
    assert not any(tmp_path.glob("[nohbmv].yaml"))
