"""The audit: judge vs humans beside humans vs humans, end to end."""

from __future__ import annotations

import asyncio
import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from framejudge.calibration.audit import FieldSpec, LabelRow, audit, majority
from framejudge.calibration.inputs import LabelsError, human_rows, judge_rows, load_human_labels, video_qa_fields
from framejudge.judge import Grader, ReferenceJudge, load_items
from framejudge.runner import run_batch
from framejudge.rubrics import get_rubric

EXAMPLES = Path(__file__).parents[2] / "examples" / "items.jsonl"


def test_majority_ties_give_no_gold():
    assert majority(["S", "S", "N"]) == "S"
    assert majority(["S", "N"]) is None
    assert majority([]) is None


def synthetic(n_items: int = 60, seed: int = 0):
    """Three annotators who mostly agree with a truth; a judge that agrees less."""
    rng = np.random.default_rng(seed)
    cats = ["Successful", "Not Successful", "Missing"]
    humans, judge = [], []
    for i in range(n_items):
        truth = cats[int(rng.choice(3, p=[0.6, 0.25, 0.15]))]
        for a in ("ann1", "ann2", "ann3"):
            label = truth if rng.random() < 0.9 else cats[int(rng.integers(0, 3))]
            humans.append(LabelRow(item_id=f"i{i}", annotator=a, values={"category_a": label}))
        j = truth if rng.random() < 0.7 else cats[int(rng.integers(0, 3))]
        judge.append(LabelRow(item_id=f"i{i}", annotator="judge", values={"category_a": j}))
    return humans, judge, [FieldSpec(name="category_a", categories=cats)]


def test_judge_below_the_human_ceiling():
    humans, judge, fields = synthetic()
    r = audit(humans, judge, fields, replicates=300, seed=1)
    f = r.fields[0]
    assert f.units == 60 and r.annotators == ["ann1", "ann2", "ann3"]
    assert f.human_alpha.estimate > f.judge_alpha.estimate
    assert f.human_alpha.low < f.human_alpha.estimate < f.human_alpha.high
    assert sum(map(sum, f.confusion)) + f.majority_ties >= 55
    assert {p.label for p in f.per_class} == {"Successful", "Not Successful", "Missing"}
    assert all(pa.units == 60 for pa in f.judge_vs_each)
    assert all(d.kind in ("judge_vs_majority", "humans_split") for d in r.disagreements)
    assert any(d.kind == "judge_vs_majority" for d in r.disagreements)


def test_missing_is_a_label_and_absent_is_absent():
    fields = [FieldSpec(name="category_a", categories=["Successful", "Missing"])]
    humans = [LabelRow(item_id="x", annotator="a", values={"category_a": "Missing"}),
              LabelRow(item_id="x", annotator="b", values={"category_a": "Missing"}),
              LabelRow(item_id="y", annotator="a", values={"category_a": "Successful"}),
              LabelRow(item_id="y", annotator="b", values={})]
    judge = [LabelRow(item_id="x", annotator="judge", values={"category_a": "Missing"})]
    r = audit(humans, judge, fields, replicates=50)
    f = r.fields[0]
    assert f.units == 2 and f.human_percent.units == 1
    assert f.human_alpha.estimate is None and "'Missing'" in f.human_alpha.undefined
    assert r.judge_units_missing == 1


def test_video_qa_labels_and_verdicts_end_to_end(tmp_path, bundled_examples):
    items = load_items(bundled_examples)
    out = tmp_path / "v.jsonl"
    asyncio.run(run_batch(Grader(ReferenceJudge(), get_rubric("video-qa"), media_root=bundled_examples.parent),
                          items, out))
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    labels = tmp_path / "labels.csv"
    with labels.open("w", newline="") as f:
        w = csv.DictWriter(f, ["item_id", "turn", "annotator", "category_a", "category_b", "preference", "multiturn"])
        w.writeheader()
        for k, v in enumerate(verdicts):
            for a in ("alice", "bob"):
                cat_a = v["response_a"]["category"]
                if a == "bob" and k % 3 == 0:
                    cat_a = "Missing" if cat_a != "Missing" else "Successful"
                w.writerow({"item_id": v["item_id"], "turn": v["turn"], "annotator": a, "category_a": cat_a,
                            "category_b": (v["response_b"] or {}).get("category", ""), "preference": v["preference"] or "",
                            "multiturn": str(v["multiturn"]).lower()})
    parsed = load_human_labels(labels)
    assert len(parsed) == 2 * len(verdicts)
    rows_j, errors = judge_rows(__import__("framejudge.judge", fromlist=["read_records"]).read_records(out))
    assert errors == 0 and len(rows_j) == len(verdicts)
    r = audit(human_rows(parsed), rows_j, video_qa_fields(), replicates=200)
    by = {f.field: f for f in r.fields}
    assert by["category_b"].judge_percent.value == 1.0  # the humans copied the judge here
    assert by["category_a"].human_percent.value < 1.0
    assert by["preference_decided"].categories == ["A", "B"]

    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "calibrate", "--human", str(labels), "--judge", str(out),
                           "--replicates", "200", "--out", str(tmp_path / "r.json"), "--disagreements",
                           str(tmp_path / "d.jsonl"), "--by", "turn", "--by", "task_type", "--compare", str(out)], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "human alpha (ceiling)" in proc.stdout and "category_a" in proc.stdout
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["replicates"] == 200 and len(saved["fields"]) == 8
    assert set(saved["slices"]["turn"]) == {"0", "1"}
    assert set(saved["slices"]["task_type"]) == {"single_turn", "multi_turn"}
    assert all(c["difference"] in (0, None) for c in saved["comparison"])
    assert "by turn" in proc.stdout and "against the human majority" in proc.stdout
    review = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert review and all(d["metadata"]["video"].startswith("videos/") for d in review)  # what to rewatch
    # Filled in by a reviewer, the file feeds back as human labels.
    first = review[0]
    first[first["metadata"]["review_field"]] = "Successful" if "category" in first["metadata"]["review_field"] else "A"
    (tmp_path / "relabelled.jsonl").write_text(json.dumps(first) + "\n")
    [label] = load_human_labels(tmp_path / "relabelled.jsonl")
    assert label.annotator == "reviewer" and label.metadata["kind"] in ("judge_vs_majority", "humans_split")


def test_labels_file_errors(tmp_path):
    bad = tmp_path / "l.jsonl"
    bad.write_text('{"item_id": "x", "annotator": "a", "category_a": "Great"}\n')
    with pytest.raises(LabelsError, match=r"l.jsonl:1: category_a: Input should be"):
        load_human_labels(bad)
    bad.write_text('{"item_id": "x", "annotator": "a"}\n{"item_id": "x", "annotator": "a"}\n')
    with pytest.raises(LabelsError, match="labelled item x turn 0 twice"):
        load_human_labels(bad)
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "calibrate", "--human", str(tmp_path / "none.csv"),
                           "--judge", str(tmp_path / "v.jsonl")], capture_output=True, text=True)
    assert proc.returncode == 2 and "no such labels file" in proc.stderr and "Traceback" not in proc.stderr


def test_real_multi_rater_image_edit_study(shared_dir):
    """75 edited images, 3-11 raters each, scores 1-7 on 12 factors, and a judge: the audit runs
    and reports the humans' low agreement honestly."""
    folder = shared_dir / "research-data/mllm-judge-image-edit-anon"
    rows = list(csv.DictReader((folder / "human_eval_results_latest.csv").open()))
    factors = rows[0]["factors_order"].split("|")
    humans = [LabelRow(item_id=r["task_id"], annotator=r["annotator_id"],
                       values={f: int(r[f]) for f in factors if r.get(f, "").strip()})
              for r in rows if r.get("skipped", "false") != "true"]
    rename = {"texture_detail": "texture_and_detail", "color_lighting": "color_and_lighting"}
    judge = []
    wanted = {h.item_id for h in humans}
    for line in (folder / "judge_evaluations_all_main.jsonl").open():
        j = json.loads(line)
        if j["image_id"] not in wanted:
            continue
        res = j["offline_factor_results"]
        judge.append(LabelRow(item_id=j["image_id"], annotator="judge",
                              values={f: res[rename.get(f, f)]["score"] for f in factors if rename.get(f, f) in res}))
    fields = [FieldSpec(name=f, categories=list(range(1, 8)), level="ordinal") for f in factors]
    r = audit(humans, judge, fields, replicates=200, seed=0)
    assert len(r.fields) == 12 and r.judge_units_missing == 0
    units = {f.field: f.units for f in r.fields}
    assert max(units.values()) == 75
    human = [f.human_alpha.estimate for f in r.fields if f.human_alpha.estimate is not None]
    assert human and max(human) < 0.6  # the humans themselves agree little: reported, not hidden
    assert all(f.human_alpha.low is None or f.human_alpha.low <= f.human_alpha.estimate for f in r.fields)
    from framejudge.calibration.report import render_html

    page = render_html(r, title="image edit study")
    assert page.count("<tr>") > 12 and "completeness" in page


def test_all_ratings_absent():
    fields = [FieldSpec(name="category_a", categories=["Successful", "Missing"])]
    humans = [LabelRow(item_id=f"x{i}", annotator=a, values={}) for i in range(3) for a in ("a", "b")]
    r = audit(humans, [], fields, replicates=20)
    f = r.fields[0]
    assert f.units == 0 and f.human_alpha.estimate is None and f.judge_alpha.estimate is None
    assert f.human_alpha.undefined and r.judge_units_missing == 3


def test_slices_and_run_comparison():
    from framejudge.calibration.audit import audit_slices, compare_runs

    humans, judge, fields = synthetic(80, seed=4)
    for row in humans + judge:
        row.metadata["domain"] = "garden" if int(row.item_id[1:]) % 2 else "text"
    slices = audit_slices(humans, judge, fields, "domain", replicates=100)
    assert set(slices) == {"garden", "text"}
    assert slices["garden"].fields[0].units == 40 and slices["text"].fields[0].units == 40
    by_turn = audit_slices(humans, judge, fields, "turn", replicates=50)
    assert set(by_turn) == {"0"}
    by_category = audit_slices(humans, judge, fields, "category_a", replicates=50)
    assert set(by_category) <= {"Successful", "Not Successful", "Missing", "(humans tie)"} and len(by_category) >= 3

    # A second run that copies the human majority is better; the paired difference says so.
    better = []
    for j in judge:
        labels = [h.values["category_a"] for h in humans if h.item_id == j.item_id]
        best = majority(labels) or j.values["category_a"]
        better.append(LabelRow(item_id=j.item_id, annotator="judge", values={"category_a": best}))
    [c] = compare_runs(humans, judge, better, fields, replicates=300, seed=2)
    assert c.second.estimate == pytest.approx(1.0)
    assert c.difference > 0 and c.low > 0
    [same] = compare_runs(humans, judge, judge, fields, replicates=100)
    assert same.difference == 0 and same.low == 0 and same.high == 0


def test_csv_extra_columns_become_metadata(tmp_path):
    p = tmp_path / "l.csv"
    p.write_text("item_id,annotator,category_a,domain\nx,a,Missing,gardening\n")
    [label] = load_human_labels(p)
    assert label.metadata == {"domain": "gardening"} and label.category_a.value == "Missing"
