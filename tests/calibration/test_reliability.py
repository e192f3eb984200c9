"""Reliability of a judge's confidence: ECE, Brier score and the reliability diagram's bins."""

from __future__ import annotations

import numpy as np
import pytest

from framejudge.calibration.reliability import calibration_error, field_reliability, reliability
from framejudge.calibration.scored import Scored, scored_units
from framejudge.schema import JudgeError, JudgeErrorKind
from tests.calibration.simulated import simulate


def test_ece_and_brier_against_hand_computed_values():
    conf = [0.95, 0.95, 0.55, 0.55, 0.15]
    right = [True, False, True, True, False]
    ece, brier, bins = calibration_error(conf, right)
    # bins [0.9, 1]: accuracy 0.5 at confidence 0.95; [0.5, 0.6): 1.0 at 0.55; [0.1, 0.2): 0 at 0.15
    assert ece == pytest.approx(2 / 5 * 0.45 + 2 / 5 * 0.45 + 1 / 5 * 0.15)
    assert brier == pytest.approx((0.05**2 + 0.95**2 + 0.45**2 + 0.45**2 + 0.15**2) / 5)
    assert len(bins) == 10 and [b.count for b in bins] == [0, 1, 0, 0, 0, 2, 0, 0, 0, 2]
    assert bins[9].accuracy == 0.5 and bins[9].mean_confidence == pytest.approx(0.95)
    assert bins[0].mean_confidence is None and bins[0].low == 0.0 and bins[9].high == 1.0


def test_edges_fall_in_the_bins_they_should():
    _, _, bins = calibration_error([0.0, 0.1, 1.0, 0.999], [False, True, True, True])
    assert bins[0].count == 1 and bins[1].count == 1 and bins[9].count == 2
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        calibration_error([1.2], [True])
    assert calibration_error([], [])[:2] == (None, None)


def test_a_calibrated_judge_has_a_small_ece_and_an_overconfident_one_a_large_one():
    rows, _, verdicts = simulate(2000, 0, right=np.array([0.55, 0.7, 0.85, 0.95, 0.99]))
    good = field_reliability("category_a", scored_units(rows, verdicts, "category_a"))
    assert good.informative and good.units == 2000 and good.ece < 0.03
    rows, _, verdicts = simulate(2000, 0, right=np.array([0.78] * 5), constant=0.99)
    over = field_reliability("category_a", scored_units(rows, verdicts, "category_a"))
    assert over.ece == pytest.approx(0.99 - 0.78, abs=0.03)
    assert over.brier > good.brier


def test_units_without_a_majority_or_a_confidence_are_left_out_and_counted():
    units = [Scored("a", 0, "S", "S", 0.9), Scored("b", 0, "S", None, 0.9), Scored("c", 0, "S", "N", None),
             Scored("d", 0, "S", "N", 0.2)]
    r = field_reliability("category_a", units)
    assert (r.units, r.no_majority, r.no_confidence) == (2, 1, 1)
    assert r.brier == pytest.approx((0.1**2 + 0.2**2) / 2)


def test_confidence_that_is_not_informative_is_reported_as_such():
    rows, _, verdicts = simulate(50, 0, informative=False)
    [r] = reliability(rows, verdicts)
    assert r.field == "category_a" and not r.informative and r.ece is None and r.brier is None
    assert r.no_confidence == 50 and r.bins == []
    # verdicts with no confidence at all (an older framejudge): nothing to report
    bare = [v.model_copy(update={"confidence": None}) for v in verdicts]
    assert reliability(rows, bare) is None
    errors = [JudgeError(item_id="i0", kind=JudgeErrorKind.timeout, message="slow")]
    assert reliability(rows, errors) is None
