"""The reference judge's calibrated confidence (rule_confidence.py): fitted on its development data,
shipped as package data that must be what the fit gives, ordered by how often each deciding path
was right, used by `grade --triage default` and by the review queue."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from scipy.stats import beta

from framejudge.calibration.triage import mismatch, thresholds_hash
from framejudge.judge import Grader, ReferenceJudge, read_records
from framejudge.judge import rule_confidence as rc
from framejudge.judge.reference import VERSION
from framejudge.rubrics import get_rubric
from framejudge.schema import GradeOptions, HumanLabel, Item, Verdict
from framejudge.service.review.queue import build_units
from tests.test_cli_outputs import cli, refused

ROOT = Path(__file__).resolve().parents[2]
RUBRIC = get_rubric("video-qa")
ERROR = "I can't help with that yet, but I'm learning more everyday!"


def single(item_id: str, question: str, response: str, golden: str | None = None) -> Item:
    return Item(id=item_id, turns=[{"question": question, "golden": golden, "response_a": response}])


def graded(*items: Item) -> list[Verdict]:
    grader = Grader(ReferenceJudge(), RUBRIC)

    async def run() -> list[Verdict]:
        return [r for it in items for r in await grader.grade(it)]

    return asyncio.run(run())


def path_of(item: Item) -> str:
    return ReferenceJudge().decide_with(RUBRIC, item, 0).paths["category_a"]


SURE = single("a-error", "What bridge is this?", ERROR)
DEFAULT = single("b-default", "What colour is the barn?", "The barn is red.")
CONTRADICTS = single("c-contradicts", "How many people are there?", "There are three people.", "There are two people.")


def test_the_confidence_is_informative_and_an_exact_rule_surer_than_the_fallback():
    assert path_of(DEFAULT) == "default" and path_of(CONTRADICTS) == "golden:contradicts"
    sure, default, contradicts = graded(SURE, DEFAULT, CONTRADICTS)
    assert sure.decided_by == "rules"  # the error-string rules decide before the judge; the same rule's confidence
    for v in (sure, default, contradicts):
        assert v.confidence.informative and set(v.confidence.fields) == {"category_a"}
        assert v.confidence.methods == {"rules": v.confidence.fields}
        assert 0 < v.confidence.fields["category_a"] < 1  # never claims certainty
    assert sure.confidence.fields["category_a"] > default.confidence.fields["category_a"]
    # "no rule applies" checked nothing of the answer: capped below the rule that compared it
    assert default.confidence.fields["category_a"] < contradicts.confidence.fields["category_a"]
    assert "error_string" in sure.confidence.note and "golden:contradicts" in contradicts.confidence.note


def test_a_preference_the_categories_decided_is_no_surer_than_they_are():
    item = Item(id="p", turns=[{"question": "How many people are there?", "golden": "There are two people.",
                                "response_a": "There are three people.", "response_b": "There are two people."}])
    [v] = graded(item)
    assert v.deciding_criterion == "category"
    c = v.confidence.fields
    assert c["preference"] <= min(c["category_a"], c["category_b"])


def test_the_shrinkage_is_a_beta_posterior_and_unseen_paths_say_so():
    assert rc._posterior(7, 9, 0.8, 4) == pytest.approx(beta(7 + 4 * 0.8, 2 + 4 * 0.2).mean())
    units = ([rc._Unit(f"i{k}", "golden:agrees", None, k % 10 != 0) for k in range(40)]
             + [rc._Unit("j", "golden:rare", None, False)]
             + [rc._Unit(f"k{k}", "error_string", None, True) for k in range(10)])
    part = rc.fit_kind(units, 8)
    rare = part["paths"]["golden:rare"]["confidence"]
    assert 0.5 < rare < part["families"]["golden"]["confidence"]  # one wrong unit: pulled towards its family
    value, why = rc.estimate(part, "golden:new")
    assert value == part["families"]["golden"]["confidence"] and "unseen" in why
    value, why = rc.estimate(part, "screen:stated")
    assert value == part["pooled"] and "unseen" in why and "pooled" in why


def test_margin_bands_are_used_only_where_a_wider_margin_is_surer():
    def units(near_right: bool) -> list[rc._Unit]:
        return ([rc._Unit(f"n{k}", "meaning:x", 0.01, near_right and k % 2 == 0) for k in range(10)]
                + [rc._Unit(f"f{k}", "meaning:x", 0.3, True) for k in range(10)])

    part = rc.fit_kind(units(near_right=True), 4)
    assert part["paths"]["meaning:x"]["margin_used"]
    assert rc.estimate(part, "meaning:x", 0.02)[0] < rc.estimate(part, "meaning:x", 0.5)[0]
    flat = rc.fit_kind([rc._Unit(u.item, u.path, 0.3 if u.margin == 0.01 else 0.01, u.correct)
                        for u in units(near_right=True)], 4)
    assert not flat["paths"]["meaning:x"]["margin_used"]  # near surer than far: the margin says nothing
    assert rc.estimate(flat, "meaning:x", 0.02)[0] == rc.estimate(flat, "meaning:x", 0.5)[0]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_confidence", ROOT / "bench" / "confidence.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_confidence"] = module
    spec.loader.exec_module(module)
    return module


def test_the_shipped_files_are_what_the_fit_gives_on_the_rules_as_they_are(tmp_path, capsys):
    bench = _bench()
    table, thresholds, figures = bench.fitted()
    data = ROOT / "framejudge" / "judge" / "data"
    assert (data / rc.TABLE_FILE).read_text(encoding="utf-8") == table, \
        f"the reference judge's rules changed since its confidence was fitted: run {rc.FIT_COMMAND}"
    assert (data / rc.THRESHOLDS_FILE).read_text(encoding="utf-8") == thresholds, \
        f"the reference judge's rules changed since its thresholds were fitted: run {rc.FIT_COMMAND}"
    assert json.loads(table)["judge_version"] == VERSION and rc.shipped_thresholds().model_id == VERSION
    # the same check from the command line, on files that are not what the fit gives
    bench.DATA_DIR = tmp_path
    assert bench.main(["--check"]) == 1
    assert "./run bench confidence" in capsys.readouterr().err
    # the development data only: no test-half item is fitted on
    split = json.loads((ROOT / "bench" / "judge_eval" / "split.json").read_text())
    keys = {k.removeprefix("ranking:") for k, _ in bench.dev_rows()}
    assert not keys & (set(split["test"]) | set(split["ranking"]["test"]))


def test_grade_triage_default_marks_the_reference_judges_verdicts_and_refuses_other_judges(tmp_path):
    pair = Item(id="d-pair", turns=[{"question": "What bridge is this?", "golden": "The Golden Gate Bridge.",
                                     "response_a": "The Golden Gate Bridge.", "response_b": ERROR}])
    items = tmp_path / "items.jsonl"
    items.write_text("".join(it.model_dump_json() + "\n" for it in (SURE, DEFAULT, CONTRADICTS, pair)))
    out = tmp_path / "v.jsonl"
    proc = cli("grade", items, "--out", out, "--triage", "default")
    assert proc.returncode == 0, proc.stderr
    shipped = rc.shipped_thresholds()
    records = [r for r in read_records(out) if r.record == "verdict"]
    assert records and {r.triage.thresholds for r in records} == {thresholds_hash(shipped)}
    for r in records:  # auto exactly where every field the thresholds hold reaches its threshold
        fields = [f for f in shipped.fields if f in r.confidence.fields]
        auto = bool(fields) and all(shipped.fields[f].threshold is not None
                                    and r.confidence.fields[f] >= shipped.fields[f].threshold for f in fields)
        assert r.triage.decision == ("auto" if auto else "to_review"), r.item_id
    assert {r.triage.decision for r in records} == {"auto", "to_review"}
    if shipped.fields["preference"].threshold is None:  # no preference threshold earned: every pair to review
        [p] = [r for r in records if r.item_id == "d-pair"]
        assert p.triage.decision == "to_review" and "preference" in p.triage.below
    other = tmp_path / "other.jsonl"
    proc = cli("grade", items, "--out", other, "--triage", "default", "--judge", "litellm:openai/gpt-4o-mini",
               "--yes", "--no-cache")
    refused(proc, "earned by the reference judge")
    assert "error:" in proc.stderr and "framejudge triage" in proc.stderr and not other.exists()
    # a reference judge of another version: its rules changed since
    why = mismatch(shipped, "reference", "reference-0", RUBRIC.content_hash)
    assert why is not None and rc.FIT_COMMAND in why
    assert mismatch(shipped, "reference", VERSION, RUBRIC.content_hash) is None


def test_the_grading_option_takes_default():
    options = GradeOptions.model_validate({"triage": "default"})
    assert options.triage == rc.shipped_thresholds()


def test_the_review_queue_puts_the_reference_judges_doubts_first():
    verdicts = graded(SURE, DEFAULT, CONTRADICTS)
    labels = [HumanLabel(item_id=v.item_id, turn=0, annotator="x", category_a=v.response_a.category)
              for v in verdicts]  # the people agree with the judge everywhere: only its doubt orders them
    units = build_units(labels, verdicts, [])
    order = [u.item_id for u in units]
    assert order == sorted(order, key=lambda i: next(v.confidence.fields["category_a"] for v in verdicts
                                                     if v.item_id == i))
    assert order[0] == "b-default" and order[-1] == "a-error"  # "no rule applies" is the least sure
