"""`framejudge triage` (thresholds from labels and verdicts) and `framejudge grade --triage`
(verdicts marked auto or to_review, the summary's counts, the review rows)."""

from __future__ import annotations

from framejudge.judge.reference import VERSION as REFERENCE_VERSION

import json
from pathlib import Path

import pytest

from framejudge.calibration.inputs import human_rows, load_human_labels
from framejudge.calibration.triage import calibrate_triage, thresholds_hash
from framejudge.judge import read_records
from framejudge.rubrics import get_rubric
from framejudge.schema import FieldThreshold, Thresholds, TriageFigures
from tests.calibration.simulated import simulate, write_files
from tests.test_cli_outputs import cli, refused


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("sim")
    _, labels, verdicts = simulate(400, 3)
    human, judge = write_files(d, labels, verdicts)
    return {"dir": d, "human": human, "judge": judge}


def test_triage_writes_the_thresholds_the_library_chooses(sim):
    out, report = sim["dir"] / "thresholds.json", sim["dir"] / "triage.html"
    proc = cli("triage", "--human", sim["human"], "--judge", sim["judge"], "--target", 0.9, "--delta", 0.1,
               "--out", out, "--report", report)
    assert proc.returncode == 0, proc.stderr
    assert "category_a" in proc.stdout and "guaranteed" in proc.stdout
    written = Thresholds.model_validate_json(out.read_text())
    expected = calibrate_triage(human_rows(load_human_labels(sim["human"])), read_records(sim["judge"]), 0.9, 0.1)
    assert written == expected.thresholds
    f = written.fields["category_a"]
    assert f.threshold is not None and f.guaranteed == 0.9 and 0 < f.test.coverage < 1
    assert f"{100 * f.test.coverage:.1f}%" in proc.stdout
    assert list(written.fields) == ["category_a"]  # the only field the humans rated
    text = report.read_text()
    assert 'class="coverage-plot"' in text and 'class="reliability-plot"' in text and "<script" not in text


def test_triage_refuses_what_it_cannot_use(sim, tmp_path):
    base = ["triage", "--human", sim["human"], "--judge", sim["judge"]]
    refused(cli(*base, "--out", tmp_path / "t.json", "--target", 1.0), "--target 1.0")
    refused(cli(*base, "--out", tmp_path / "t.json", "--delta", 0), "--delta 0")
    refused(cli(*base, "--out", tmp_path / "t.json", "--split", 0), "--split")
    refused(cli(*base, "--out", tmp_path / "t.json", "--field", "category_c"), "--field category_c: not a label field")
    refused(cli(*base, "--out", sim["judge"]), "would overwrite an input")
    refused(cli("triage", "--human", sim["human"], "--judge", tmp_path / "none.jsonl", "--out", tmp_path / "t.json"),
            "no such verdicts file")
    _, labels, one = simulate(40, 0)
    _, _, two = simulate(40, 0, model="another")
    human, judge = write_files(tmp_path / "mixed", labels, one[:20] + two[20:])
    refused(cli("triage", "--human", human, "--judge", judge, "--out", tmp_path / "t.json"), "more than one judge")
    assert not (tmp_path / "t.json").exists()


def test_triage_of_a_judge_without_informative_confidence_says_so(tmp_path):
    _, labels, verdicts = simulate(100, 0, informative=False)
    human, judge = write_files(tmp_path, labels, verdicts)
    proc = cli("triage", "--human", human, "--judge", judge, "--out", tmp_path / "t.json")
    assert proc.returncode == 0, proc.stderr
    assert "no verdict" in proc.stderr and "informative" in proc.stderr
    f = Thresholds.model_validate_json((tmp_path / "t.json").read_text()).fields["category_a"]
    assert f.threshold is None and f.calibration.coverage == 0 and f.test.coverage == 0


def test_triage_says_why_a_field_has_no_threshold_and_counts_no_unscored_unit_below_it(tmp_path):
    _, labels, verdicts = simulate(100, 0, informative=False)
    human, judge = write_files(tmp_path, labels, verdicts)
    proc = cli("triage", "--human", human, "--judge", judge, "--out", tmp_path / "t.json", "--report",
               tmp_path / "t.html")
    assert proc.returncode == 0, proc.stderr
    why = "category_a: no threshold: no verdict has an informative confidence for this field"
    assert why in proc.stdout and "every verdict goes to review for it" in proc.stdout
    assert why in (tmp_path / "t.html").read_text()
    f = Thresholds.model_validate_json((tmp_path / "t.json").read_text()).fields["category_a"]
    for part in (f.calibration, f.test):  # no confidence: neither above nor below a threshold
        assert part.no_confidence == part.units > 0
        assert (part.scored_above, part.scored_below, part.agreement_below) == (0, 0, None)
    assert "– / –" in proc.stdout  # agreement above / below (test): neither part has a unit

    _, labels, verdicts = simulate(20, 0)  # informative, but too few units to test a threshold
    human, judge = write_files(tmp_path / "few", labels, verdicts)
    proc = cli("triage", "--human", human, "--judge", judge, "--out", tmp_path / "few.json")
    assert proc.returncode == 0, proc.stderr
    assert "calibration unit(s) have both a confidence and a human majority; a threshold is tested with at least " \
           "30 (--min-units)" in proc.stdout.replace("\n", " ")


def reference_thresholds(path: Path, model_id: str = REFERENCE_VERSION, threshold: float = 1.0) -> Thresholds:
    """Thresholds for the reference judge; at 1.0 no verdict reaches them (its confidence never claims 1.0)."""
    rubric = get_rubric("video-qa")
    figures = TriageFigures(units=0, covered=0, coverage=0.0, scored_above=0, scored_below=0)
    t = Thresholds(target=0.9, delta=0.1, judge_backend="reference", model_id=model_id, rubric_id=rubric.id,
                   rubric_hash=rubric.content_hash,
                   fields={"category_a": FieldThreshold(threshold=threshold, guaranteed=0.9, calibration=figures)})
    path.write_text(t.model_dump_json(indent=1))
    return t


def test_grade_with_thresholds_marks_every_verdict_and_writes_the_review_rows(bundled_examples, tmp_path):
    thresholds = reference_thresholds(tmp_path / "t.json")
    verdicts, review, summary = tmp_path / "v.jsonl", tmp_path / "review.jsonl", tmp_path / "s.json"
    first = cli("grade", bundled_examples, "--out", verdicts)  # graded before any thresholds
    assert first.returncode == 0, first.stderr
    assert all(r.triage is None for r in read_records(verdicts))
    proc = cli("grade", bundled_examples, "--out", verdicts, "--triage", tmp_path / "t.json", "--review-out", review,
               "--summary-json", summary)
    assert proc.returncode == 0, proc.stderr
    records = [r for r in read_records(verdicts) if r.record == "verdict"]
    # no confidence of the reference judge reaches 1.0: everything goes to review, kept verdicts included
    assert records and all(r.triage.decision == "to_review" and r.triage.below == ["category_a"] for r in records)
    assert {r.triage.thresholds for r in records} == {thresholds_hash(thresholds)}
    counts = json.loads(proc.stdout)["triage"]
    assert counts["auto"] == 0 and counts["to_review"] == len(records)
    assert counts["thresholds"] == [thresholds_hash(thresholds)]
    assert json.loads(summary.read_text())["triage"] == counts
    rows = load_human_labels(review)  # filled in, they feed back as human labels
    assert len(rows) == len(records) and all(r.metadata["review_fields"] == ["category_a"] for r in rows)
    assert {(r.item_id, r.turn) for r in rows} == {(r.item_id, r.turn) for r in records}


def test_grade_refuses_thresholds_of_another_judge_before_grading(bundled_examples, tmp_path):
    reference_thresholds(tmp_path / "t.json", model_id="reference-0")
    verdicts = tmp_path / "v.jsonl"
    refused(cli("grade", bundled_examples, "--out", verdicts, "--triage", tmp_path / "t.json"),
            "calibrated for judge reference reference-0")
    assert not verdicts.exists()
    refused(cli("grade", bundled_examples, "--out", verdicts, "--review-out", tmp_path / "r.jsonl"), "give --triage")
    (tmp_path / "bad.json").write_text('{"target": 0.9}')
    refused(cli("grade", bundled_examples, "--out", verdicts, "--triage", tmp_path / "bad.json"),
            "not a thresholds file")
    refused(cli("grade", bundled_examples, "--out", verdicts, "--triage", tmp_path / "none.json"),
            "no such thresholds file")
    assert not verdicts.exists()
