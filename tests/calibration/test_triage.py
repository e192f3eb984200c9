"""Selective judging: thresholds by fixed-sequence testing, checked on simulated judges whose
error rate at each confidence level is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from framejudge.calibration.triage import (calibrate_triage, choose_threshold, lower_bound, mark, marker, mismatch,
                                           review_rows, split_items, thresholds_hash)
from framejudge.schema import Confidence
from tests.calibration.simulated import simulate, template, true_agreement, true_coverage

REPETITIONS = 200


def test_lower_bound_is_the_exact_one_sided_binomial_bound():
    # all right: the bound solves p^n = delta
    assert lower_bound(40, 40, 0.1) == pytest.approx(0.1 ** (1 / 40))
    # the one-sided 1 - delta bound is the lower end of the two-sided 1 - 2 delta exact interval
    for right, n in ((45, 50), (180, 200), (7, 30)):
        ci = binomtest(right, n).proportion_ci(confidence_level=0.8, method="exact")
        assert lower_bound(right, n, 0.1) == pytest.approx(ci.low)
    assert lower_bound(0, 30, 0.1) == 0.0 and lower_bound(0, 0, 0.1) == 0.0


def test_testing_stops_at_the_first_threshold_that_fails():
    # the strictest level passes, the next fails; a lower one would pass again, but is never tested
    conf = [0.9] * 40 + [0.8] * 40 + [0.7] * 600
    right = [True] * 40 + [False] * 40 + [True] * 600
    threshold, bound, tested = choose_threshold(conf, right, target=0.9, delta=0.1)
    assert threshold == 0.9 and tested == 1 and bound == pytest.approx(0.1 ** (1 / 40))
    # the strictest fails at once: no threshold, however good the rest
    threshold, bound, tested = choose_threshold([0.9] * 40 + [0.7] * 600, [False] * 40 + [True] * 600, 0.9, 0.1)
    assert threshold is None and bound is None and tested == 0


def test_a_threshold_needs_enough_units_above_it():
    conf, right = [0.99] * 29, [True] * 29
    assert choose_threshold(conf, right, 0.9, 0.1)[0] is None  # 29 < 30 units: not tested
    assert choose_threshold(conf, right, 0.9, 0.1, min_units=22)[0] == 0.99  # 0.9^22 < 0.1


def test_the_guarantee_holds_at_least_at_one_minus_delta():
    """Over seeded repetitions, the true agreement above the chosen threshold (known from the
    simulated judge's error rates) is at least the target in at least 1 - delta of them."""
    target, delta = 0.9, 0.1
    held, covered, test_agree = 0, [], []
    for seed in range(REPETITIONS):
        rows, _, verdicts = simulate(200, seed)
        f = calibrate_triage(rows, verdicts, target, delta, seed=seed).thresholds.fields["category_a"]
        truth = true_agreement(f.threshold)
        held += truth is None or truth >= target
        covered.append(f.test.coverage)
        if f.test.agreement_above is not None:
            test_agree.append(f.test.agreement_above)
        assert f.test.coverage == pytest.approx(true_coverage(f.threshold), abs=0.2)
    assert held / REPETITIONS >= 1 - delta
    assert np.mean(covered) > 0.2  # a judge with informative confidence is trusted on a fair share
    assert np.mean(test_agree) >= target  # and on held-out units it agrees as promised


def test_thresholds_rise_with_the_target():
    for seed in range(20):
        rows, _, verdicts = simulate(300, seed)
        chosen = []
        for target in (0.8, 0.9, 0.95, 0.99):
            f = calibrate_triage(rows, verdicts, target, 0.1, seed=seed).thresholds.fields["category_a"]
            chosen.append((np.inf if f.threshold is None else f.threshold, f.calibration.coverage))
        thresholds = [t for t, _ in chosen]
        coverages = [c for _, c in chosen]
        assert thresholds == sorted(thresholds) and coverages == sorted(coverages, reverse=True)
        assert thresholds[0] < thresholds[-1]


@pytest.mark.parametrize("kind", ["constant", "unrelated", "not informative"])
def test_uninformative_confidence_gets_no_coverage_rather_than_a_false_guarantee(kind):
    """A judge right 78 % of the time whose confidence says nothing: always 1.0 (as a
    deterministic judge would falsely claim), unrelated to its hits, or marked not informative."""
    flat = np.array([0.78] * 5)
    coverage = []
    for seed in range(50):
        rows, _, verdicts = simulate(200, seed, right=flat, informative=kind != "not informative",
                                     constant=1.0 if kind == "constant" else None)
        f = calibrate_triage(rows, verdicts, 0.9, 0.1, seed=seed).thresholds.fields["category_a"]
        coverage.append(f.test.coverage)
        if kind != "unrelated":
            assert f.threshold is None and f.guaranteed is None
            assert f.calibration.coverage == 0 and f.test.coverage == 0
        if kind == "not informative":
            assert f.calibration.no_confidence == f.calibration.units > 0
    assert np.mean(coverage) < 0.05


def test_the_split_keeps_whole_items_together_and_follows_the_seed():
    items = [f"i{k}" for k in range(100) for _ in range(3)]
    cal = split_items(items, 0.5, seed=4)
    assert len(cal) == 50 and cal == split_items(items, 0.5, seed=4) and cal != split_items(items, 0.5, seed=5)
    assert len(split_items(items, 0.3, seed=4)) == 30
    rows, _, verdicts = simulate(120, 0, turns=3)
    f = calibrate_triage(rows, verdicts, 0.9, 0.1).thresholds.fields["category_a"]
    assert f.calibration.units + f.test.units == 360
    assert f.calibration.units % 3 == 0 and f.test.units == 360 - f.calibration.units  # turns stay with their item
    assert f.calibration.units == 180


def test_verdicts_of_two_judges_are_refused():
    rows, _, verdicts = simulate(40, 0)
    _, _, others = simulate(40, 1, model="another")
    with pytest.raises(ValueError, match="more than one judge"):
        calibrate_triage(rows, verdicts[:20] + others[20:], 0.9, 0.1)
    with pytest.raises(ValueError, match="not a label field"):
        calibrate_triage(rows, verdicts, 0.9, 0.1, fields=["category_c"])


def test_marks_auto_only_where_every_thresholded_field_reaches_its_threshold():
    rows, _, verdicts = simulate(400, 0)
    thresholds = calibrate_triage(rows, verdicts, 0.9, 0.1).thresholds
    t = thresholds.fields["category_a"].threshold
    assert t is not None
    base = template()

    def with_conf(c: Confidence | None):
        return base.model_copy(update={"confidence": c})

    high = mark(with_conf(Confidence(informative=True, fields={"category_a": t})), thresholds)
    assert high.decision == "auto" and high.below == [] and high.thresholds == thresholds_hash(thresholds)
    low = mark(with_conf(Confidence(informative=True, fields={"category_a": t - 0.01})), thresholds)
    assert low.decision == "to_review" and low.below == ["category_a"]
    for c in (None, Confidence(informative=False), Confidence(informative=True, fields={"preference": 1.0})):
        assert mark(with_conf(c), thresholds).decision == "to_review"
    none = thresholds.model_copy(update={"fields": {"category_a": thresholds.fields["category_a"].model_copy(
        update={"threshold": None})}})
    assert mark(with_conf(Confidence(informative=True, fields={"category_a": 1.0})), none).decision == "to_review"
    # thresholds that do not hold for the judge send everything to review
    marked = marker(thresholds, problem="another judge")(with_conf(Confidence(informative=True,
                                                                             fields={"category_a": 1.0})))
    assert marked.triage.decision == "to_review"
    rows_out = review_rows([marker(thresholds)(v) for v in verdicts[:50]])
    assert rows_out and all(r.metadata["review_fields"] == ["category_a"] for r in rows_out)
    assert all(r.category_a is None and r.annotator == "reviewer" for r in rows_out)


def test_thresholds_name_the_judge_and_rubric_they_hold_for():
    rows, _, verdicts = simulate(60, 0)
    thresholds = calibrate_triage(rows, verdicts, 0.9, 0.1).thresholds
    rubric = verdicts[0].provenance.rubric_hash
    assert mismatch(thresholds, "litellm", "sim-judge", rubric) is None
    assert "calibrated for judge litellm sim-judge" in mismatch(thresholds, "litellm", "other", rubric)
    assert "calibrated for judge" in mismatch(thresholds, "reference", None, rubric)
    assert "rubric video-qa" in mismatch(thresholds, "litellm", "sim-judge", "0" * 16)
