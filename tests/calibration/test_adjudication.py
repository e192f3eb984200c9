"""Gold labels from annotators and reviewers' decisions, their label-row files, and the judge
measured against them (before and after), in the library and in `framejudge calibrate --gold`."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from framejudge.calibration.adjudication import (CSV_COLUMNS, label_rows_csv, label_rows_jsonl, majority_values,
                                                 standing_labels)
from framejudge.calibration.audit import AuditResult, LabelRow, audit, gold_shift, majority
from framejudge.calibration.inputs import (LabelsError, gold_rows, human_rows, load_gold_labels, load_human_labels,
                                           video_qa_fields)
from framejudge.schema import HumanLabel, LabelValues, ReviewDecision
from tests.calibration.test_audit import synthetic

ROOT = Path(__file__).parents[2]
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


def label(item: str, annotator: str, turn: int = 0, **values) -> HumanLabel:
    return HumanLabel(item_id=item, turn=turn, annotator=annotator, **values)


def decision(item: str, reviewer: str, minutes: int = 0, action: str = "manual", turn: int = 0, **kw) -> ReviewDecision:
    return ReviewDecision(item_id=item, turn=turn, reviewer=reviewer, decided_at=T0 + timedelta(minutes=minutes),
                          action=action, **kw)


def by_unit(rows: list[HumanLabel]) -> dict[tuple[str, int], HumanLabel]:
    return {(r.item_id, r.turn): r for r in rows}


# --------------------------------------------------------------------------- standing labels

def test_majority_values_per_field_and_ties_left_empty():
    labels = [label("x", "a", category_a="Missing", preference="A", multiturn=True),
              label("x", "b", category_a="Missing", preference="B"),
              label("x", "c", category_a="Successful")]
    m = majority_values(labels)
    assert m == LabelValues(category_a="Missing", multiturn=True)  # preference A vs B: a tie, no gold
    assert majority_values([]) == LabelValues()
    with pytest.raises(ValueError, match="labels of 2 units"):
        majority_values([label("x", "a"), label("y", "a")])


def test_unanimous_and_unresolved_without_decisions():
    humans = [label("u", "a", category_a="Successful", preference="A", metadata={"domain": "garden"}),
              label("u", "b", category_a="Successful", preference="A"),
              label("s", "a", category_a="Successful", preference="A"),
              label("s", "b", category_a="Missing", preference="A"),
              label("s", "c", category_a="Missing", preference="B"),
              label("t", "a", category_a="Successful"),
              label("t", "b", category_a="Not Successful"),
              label("p", "a", category_a="Successful", preference="A"),
              label("p", "b", category_a="Successful"),  # b did not rate the preference: not unanimous
              label("one", "a", category_b="Missing")]
    rows = standing_labels(humans, [])
    assert [(r.item_id, r.turn) for r in rows] == sorted({(h.item_id, h.turn) for h in humans})
    assert all(r.annotator == "gold" for r in rows)
    got = by_unit(rows)
    u = got[("u", 0)]
    assert u.metadata == {"domain": "garden", "standing": "unanimous", "annotators": 2}
    assert (u.category_a.value, u.preference.value) == ("Successful", "A")
    s = got[("s", 0)]
    assert s.metadata == {"standing": "unresolved", "annotators": 3}
    assert (s.category_a.value, s.preference.value) == ("Missing", "A")
    t = got[("t", 0)]
    assert t.metadata["standing"] == "unresolved" and t.category_a is None  # a tie gives no gold
    assert got[("p", 0)].metadata["standing"] == "unresolved" and got[("p", 0)].preference.value == "A"
    assert got[("one", 0)].metadata == {"standing": "unanimous", "annotators": 1}


def test_a_reviewers_latest_decision_adjudicates_and_skips_do_not_count():
    humans = [label("x", "a", category_a="Successful"), label("x", "b", category_a="Missing"),
              label("y", "a", category_a="Successful"), label("y", "b", category_a="Successful")]
    decisions = [
        decision("x", "key1", 0, labels=LabelValues(category_a="Missing"), cause="humans_wrong"),
        decision("x", "key1", 5, action="adopt_judge", labels=LabelValues(category_a="Not Successful"),
                 replaced=LabelValues(), cause="judge_wrong", note="looked again at 0:12", flag_rubric=True),
        decision("x", "key1", 9, action="skip"),  # a later skip leaves the decision standing
        decision("y", "key2", 1, action="skip"),
    ]
    rows = by_unit(standing_labels(humans, list(reversed(decisions)), annotator="lead"))
    x = rows[("x", 0)]
    assert x.annotator == "lead" and x.category_a.value == "Not Successful"
    assert x.metadata == {"standing": "adjudicated", "reviewer": "key1", "decided_at": "2025-03-01T12:05:00+00:00",
                          "action": "adopt_judge", "cause": "judge_wrong", "note": "looked again at 0:12",
                          "flag_rubric": True, "annotators": 2}
    assert rows[("y", 0)].metadata == {"standing": "unanimous", "annotators": 2}  # only skipped


def test_two_reviewers_who_agree_adjudicate_and_two_who_differ_conflict():
    humans = [label("x", "a", category_a="Successful"), label("x", "b", category_a="Successful"),
              label("x", "c", category_a="Missing"),
              label("y", "a", category_a="Successful"), label("y", "b", category_a="Missing"),
              label("y", "c", category_a="Missing")]
    decisions = [decision("x", "key1", 0, labels=LabelValues(category_a="Missing")),
                 decision("x", "key2", 3, action="adopt_annotator", source="c", labels=LabelValues(category_a="Missing")),
                 decision("y", "key1", 0, labels=LabelValues(category_a="Successful")),
                 decision("y", "key2", 1, labels=LabelValues(category_a="Irrelevant")),
                 decision("y", "key2", 2, labels=LabelValues(category_a="Not Successful"))]
    rows = by_unit(standing_labels(humans, decisions))
    x = rows[("x", 0)]
    assert x.category_a.value == "Missing" and x.metadata["standing"] == "adjudicated"
    assert x.metadata["reviewer"] == "key2" and x.metadata["reviewers"] == ["key1", "key2"]
    assert x.metadata["source"] == "c" and x.metadata["decided_at"] == "2025-03-01T12:03:00+00:00"
    y = rows[("y", 0)]
    assert y.metadata == {"standing": "unresolved", "conflict": True, "reviewers": ["key1", "key2"], "annotators": 3}
    assert y.category_a.value == "Missing"  # the human majority, not either reviewer
    # The same reviewer's later decision agrees with key1: the conflict is resolved.
    decisions.append(decision("y", "key2", 4, labels=LabelValues(category_a="Successful")))
    assert by_unit(standing_labels(humans, decisions))[("y", 0)].metadata["standing"] == "adjudicated"


def test_a_decision_on_a_unit_nobody_labelled_is_refused():
    with pytest.raises(ValueError, match="a decision on item 'z' turn 1, which no annotator labelled"):
        standing_labels([label("x", "a")], [decision("z", "key1", turn=1, labels=LabelValues(category_a="Missing"))])


# --------------------------------------------------------------------------- label-row files

def exported() -> list[HumanLabel]:
    humans = [label("i1", "a", category_a="Successful", category_b="Missing", preference="A", integrity_a=False,
                    metadata={"domain": "garden, shed", "model": "m1"}),
              label("i1", "b", category_a="Not Successful", category_b="Missing", preference="A", integrity_a=True),
              label("i2", "a", turn=2, transcription_error=True, multiturn=False),
              label("i2", "b", turn=2, transcription_error=True, multiturn=False),
              label("i3", "a", category_a="Error message"), label("i3", "b", category_a="Irrelevant"),
              label("i4", "a", preference="Both"), label("i4", "b", preference="Neither")]
    decisions = [decision("i1", "key1", labels=LabelValues(category_a="Successful", category_b="Missing",
                                                           preference="Both", integrity_a=False),
                          note='two lines,\n"quoted"', cause="humans_wrong"),
                 decision("i3", "key1", labels=LabelValues(category_a="Irrelevant")),
                 decision("i3", "key2", labels=LabelValues(category_a="Missing"))]
    return standing_labels(humans, decisions)


def test_jsonl_round_trip(tmp_path):
    rows = exported()
    path = tmp_path / "gold.jsonl"
    path.write_text(label_rows_jsonl(rows))
    assert load_human_labels(path) == rows
    assert load_gold_labels(path) == rows


def test_csv_round_trip(tmp_path):
    rows = exported()
    text = label_rows_csv(rows)
    header = text.splitlines()[0].split(",")
    assert tuple(header[:len(CSV_COLUMNS)]) == CSV_COLUMNS == (
        "item_id", "turn", "annotator", "category_a", "category_b", "preference", "integrity_a", "integrity_b",
        "transcription_error", "multiturn", "standing", "reviewer", "decided_at", "cause", "note", "flag_rubric")
    assert header[len(CSV_COLUMNS):] == ["domain", "model", "action", "annotators", "conflict", "reviewers"]
    path = tmp_path / "gold.csv"
    path.write_text(text, encoding="utf-8")
    back = load_human_labels(path)
    fields = ("item_id", "turn", "annotator", *LabelValues.model_fields)
    assert [r.model_dump(include=set(fields)) for r in back] == [r.model_dump(include=set(fields)) for r in rows]
    # CSV cells are text: metadata reads back as its text (JSON for lists), the rest exactly.
    assert back[0].metadata == {"domain": "garden, shed", "model": "m1", "standing": "adjudicated",
                                "reviewer": "key1", "decided_at": "2025-03-01T12:00:00+00:00", "action": "manual",
                                "cause": "humans_wrong", "note": 'two lines,\n"quoted"', "flag_rubric": "false",
                                "annotators": "2"}
    i3 = next(r for r in back if r.item_id == "i3")
    assert i3.metadata["conflict"] == "true" and json.loads(i3.metadata["reviewers"]) == ["key1", "key2"]
    assert load_gold_labels(path) == back


@pytest.mark.parametrize("text", ["=1+2", "+1", "-2", "@SUM(A1)", "\tx", "\rx", "'=quoted", "''", "'plain", "plain",
                                  "-", "'"])
def test_a_csv_cell_never_starts_a_formula_and_reads_back_as_written(tmp_path, text):
    row = label("=HYPERLINK(1)", "@annotator", metadata={"note": text, "+key": text})
    written = label_rows_csv([row])
    cells = [c for line in csv.reader(io.StringIO(written, newline="")) for c in line]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    path = tmp_path / "labels.csv"
    path.write_text(written, encoding="utf-8")
    [back] = load_human_labels(path)
    assert (back.item_id, back.annotator) == ("=HYPERLINK(1)", "@annotator")
    assert back.metadata["+key"].strip() == back.metadata["note"].strip() == text.strip()  # cells are stripped


def test_csv_refuses_metadata_named_as_a_column():
    with pytest.raises(ValueError, match="metadata key 'turn' is a label row's column"):
        label_rows_csv([label("x", "a", metadata={"turn": 3})])


def test_gold_files_have_one_row_per_labelled_unit(tmp_path):
    path = tmp_path / "gold.jsonl"
    path.write_text('{"item_id": "x", "annotator": "lead", "category_a": "Missing"}\n\n'
                    '{"item_id": "x", "annotator": "other", "category_a": "Successful"}\n')
    with pytest.raises(LabelsError, match=rf"^{path}:3: a second gold row for item x turn 0 \(the first is {path}:1\)"):
        load_gold_labels(path)
    path.write_text('{"item_id": "x", "annotator": "lead"}\n{"item_id": "x", "turn": 1, "annotator": "lead"}\n')
    with pytest.raises(LabelsError, match=rf"^{path}:2: item x turn 1 has no human label"):
        load_gold_labels(path, {("x", 0)})
    assert len(load_gold_labels(path, {("x", 0), ("x", 1)})) == 2


# --------------------------------------------------------------------------- before and after

def gold_from(humans: list[LabelRow], judge: list[LabelRow], humans_wrong: bool) -> tuple[list[LabelRow], int]:
    """Gold for every unit where the judge and the majority differ: the judge's label (the
    humans were wrong) or the majority's (the judge was wrong)."""
    judged = {j.item_id: j.values["category_a"] for j in judge}
    gold = []
    for item, j in judged.items():
        m = majority([h.values["category_a"] for h in humans if h.item_id == item])
        if m is not None and m != j:
            gold.append(LabelRow(item_id=item, annotator="gold", values={"category_a": j if humans_wrong else m}))
    return gold, len(gold)


def test_humans_wrong_raises_the_judges_figure():
    humans, judge, fields = synthetic(60, seed=5)
    gold, n = gold_from(humans, judge, humans_wrong=True)
    assert n >= 5
    [g] = gold_shift(humans, judge, gold, fields, replicates=300, seed=1)
    before = audit(humans, judge, fields, replicates=300, seed=1).fields[0]
    assert g.before == before.judge_alpha and g.before_percent == before.judge_percent  # before: the audit's figure
    assert g.after.estimate > g.before.estimate and g.after_percent.value > g.before_percent.value
    assert g.difference == pytest.approx(g.after.estimate - g.before.estimate)
    assert 0 < g.low <= g.difference <= g.high
    assert g.changed == n and g.units_before == g.units_after == 60 - before.majority_ties
    assert g.replicates == 300 and g.undefined_replicates == 0


def test_judge_wrong_leaves_the_figure_exactly_unchanged():
    humans, judge, fields = synthetic(60, seed=5)
    gold, n = gold_from(humans, judge, humans_wrong=False)
    assert n >= 5
    [g] = gold_shift(humans, judge, gold, fields, replicates=300, seed=1)
    assert g.after == g.before and g.after_percent == g.before_percent
    assert g.difference == 0 and g.low == 0 and g.high == 0 and g.changed == 0


def test_gold_only_replaces_what_it_covers():
    fields = video_qa_fields()
    humans = human_rows([label("x", "a", category_a="Successful", preference="A"),
                         label("x", "b", category_a="Successful", preference="A"),
                         label("y", "a", category_a="Missing"), label("y", "b", category_a="Successful")])
    judge = [LabelRow(item_id=i, annotator="judge", values={"category_a": "Missing", "preference": "A",
                                                            "preference_decided": "A"}) for i in ("x", "y")]
    # x: gold says Both (so no decided preference) and leaves category_a to the majority; y: the tie gets gold.
    gold = gold_rows([label("x", "gold", preference="Both"), label("y", "gold", category_a="Missing")])
    by = {g.field: g for g in gold_shift(humans, judge, gold, fields, replicates=50)}
    assert (by["category_a"].units_before, by["category_a"].units_after, by["category_a"].changed) == (1, 2, 1)
    assert by["category_a"].before_percent.value == 0 and by["category_a"].after_percent.value == 0.5
    assert (by["preference"].changed, by["preference"].after_percent.value) == (1, 0)
    assert (by["preference_decided"].units_before, by["preference_decided"].units_after) == (1, 0)
    assert by["preference_decided"].changed == 1
    assert by["integrity_a"].units_after == 0 and by["integrity_a"].difference is None


def test_bad_gold_is_refused():
    humans, judge, fields = synthetic(5)
    twice = [LabelRow(item_id="i1", annotator="lead", values={}), LabelRow(item_id="i1", annotator="other", values={})]
    with pytest.raises(ValueError, match="gold labels item i1 turn 0 twice \\(rows of 'lead' and 'other'\\)"):
        gold_shift(humans, judge, twice, fields, replicates=10)
    with pytest.raises(ValueError, match="gold labels item zz turn 0, which has no human labels"):
        gold_shift(humans, judge, [LabelRow(item_id="zz", annotator="lead")], fields, replicates=10)


def test_the_audit_result_stores_the_shift():
    humans, judge, fields = synthetic(20)
    result = audit(humans, judge, fields, replicates=20)
    assert result.gold == []
    result.gold = gold_shift(humans, judge, gold_from(humans, judge, True)[0], fields, replicates=20)
    assert AuditResult.model_validate_json(result.model_dump_json()) == result


# --------------------------------------------------------------------------- framejudge calibrate --gold

def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framejudge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "250"})


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bundled_examples) -> dict[str, Path]:
    """A reference-judge run, two annotators who agree with each other and, on every other
    unit, not with the judge's category_a, and the gold after a reviewer sided with the judge."""
    d = tmp_path_factory.mktemp("gold")
    verdicts = d / "v.jsonl"
    proc = cli("grade", bundled_examples, "--out", verdicts)
    assert proc.returncode == 0, proc.stderr
    humans, decisions = [], []
    for k, line in enumerate(verdicts.read_text().splitlines()):
        v = json.loads(line)
        judged = v["response_a"]["category"]
        other = "Missing" if judged != "Missing" else "Successful"
        cat = other if k % 2 else judged
        for a in ("alice", "bob"):
            humans.append(label(v["item_id"], a, turn=v["turn"], category_a=cat, preference=v["preference"]))
        if k % 2:
            decisions.append(decision(v["item_id"], "key1", k, turn=v["turn"], action="adopt_judge",
                                      labels=LabelValues(category_a=judged, preference=v["preference"]),
                                      replaced=LabelValues(category_a=cat), cause="humans_wrong"))
    labels = d / "labels.jsonl"
    labels.write_text(label_rows_jsonl(humans))
    gold = d / "gold.csv"
    gold.write_text(label_rows_csv(standing_labels(humans, decisions)))
    return {"verdicts": verdicts, "labels": labels, "gold": gold, "dir": d, "changed": len(decisions)}


# one worker grades the examples for both tests, where each worker would grade them
@pytest.mark.xdist_group("adjudication-graded")
def test_calibrate_shows_before_and_after(graded):
    d = graded["dir"]
    proc = cli("calibrate", "--human", graded["labels"], "--judge", graded["verdicts"], "--gold", graded["gold"],
               "--replicates", 200, "--out", d / "r.json", "--report", d / "r.html")
    assert proc.returncode == 0, proc.stderr
    assert "against the adjudicated gold (gold.csv): before (human majority) and after" in proc.stdout
    saved = json.loads((d / "r.json").read_text())
    by = {g["field"]: g for g in saved["gold"]}
    assert len(by) == 8
    cat = by["category_a"]
    assert cat["changed"] == graded["changed"] and cat["after_percent"]["value"] == 1.0
    assert cat["after_percent"]["value"] > cat["before_percent"]["value"] and cat["difference"] > 0
    assert by["preference"]["changed"] == 0 and by["preference"]["difference"] in (0, None)
    line = next(x for x in proc.stdout.splitlines() if "category_a" in x and "%" in x)
    assert f"{100 * cat['before_percent']['value']:.1f}%" in line and "100.0%" in line
    assert f"{cat['difference']:+.3f}" in line
    page = (d / "r.html").read_text()
    assert "Against the adjudicated gold: before and after" in page and "id=gold" in page


def refused(proc: subprocess.CompletedProcess[str], words: str) -> None:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"error: {words}" in proc.stderr, proc.stderr


@pytest.mark.xdist_group("adjudication-graded")
def test_calibrate_refuses_bad_gold(graded, tmp_path):
    base = ["calibrate", "--human", graded["labels"], "--judge", graded["verdicts"], "--replicates", 10]
    lines = graded["gold"].read_text().splitlines()
    twice = tmp_path / "twice.csv"
    twice.write_text("\n".join([lines[0], lines[1], lines[2], lines[1]]) + "\n")
    refused(cli(*base, "--gold", twice), f"{twice}:4: a second gold row for item")
    assert f"(the first is {twice}:2)" in cli(*base, "--gold", twice).stderr
    stray = tmp_path / "stray.jsonl"
    stray.write_text('{"item_id": "not-labelled", "annotator": "lead", "category_a": "Missing"}\n')
    refused(cli(*base, "--gold", stray), f"{stray}:1: item not-labelled turn 0 has no human label")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item_id": "x", "annotator": "lead", "category_a": "Great"}\n')
    refused(cli(*base, "--gold", bad), f"{bad}:1: category_a: Input should be")
    refused(cli(*base, "--gold", tmp_path / "none.csv"), f"{tmp_path / 'none.csv'}: no such labels file")
    refused(cli(*base, "--gold", graded["gold"], "--out", graded["gold"]), f"{graded['gold']}")
