"""Structured (segment) agreement: hand-computed cases."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from framejudge.calibration.structured import Segment, item_agreement, match, structured_agreement, temporal_iou


def s(a, b, label="x"):
    return Segment(start=a, end=b, label=label)


def test_temporal_iou():
    assert temporal_iou(s(0, 10), s(5, 15)) == pytest.approx(5 / 15)
    assert temporal_iou(s(0, 10), s(0, 10)) == 1.0
    assert temporal_iou(s(0, 1), s(2, 3)) == 0.0
    assert temporal_iou(s(4, 4), s(4, 4)) == 1.0  # the same instant agrees
    assert temporal_iou(s(4, 4), s(5, 5)) == 0.0


def test_threshold_is_inclusive():
    assert match([s(0, 10)], [s(0, 5)], 0.5) == [(0, 0, 0.5)]
    assert match([s(0, 10)], [s(0, 4.9)], 0.5) == []


def test_matching_maximises_the_number_of_pairs():
    # Greedy by IoU would pair a0 with b0 (0.9) and leave a1 unmatched; two pairs are possible.
    a = [s(0, 9), s(0, 5.5)]
    b = [s(0, 10), s(0, 15)]
    assert temporal_iou(a[0], b[0]) == pytest.approx(0.9) and temporal_iou(a[1], b[1]) < 0.5
    pairs = match(a, b, 0.5)
    assert sorted((i, j) for i, j, _ in pairs) == [(0, 1), (1, 0)]
    a = [s(0, 10), s(10, 20)]
    b = [s(0, 10), s(10, 20)]
    assert sorted((i, j) for i, j, _ in match(a, b)) == [(0, 0), (1, 1)]


def test_item_agreement_hand_computed():
    assert item_agreement([], []) == 1.0
    assert item_agreement([s(0, 10)], []) == 0.0
    # one pair, same label, IoU 0.5: 0.5 / 1
    assert item_agreement([s(0, 10)], [s(0, 5)]) == pytest.approx(0.5)
    # one pair with different labels: half its IoU
    assert item_agreement([s(0, 10, "dog")], [s(0, 10, "cat")]) == pytest.approx(0.5)
    # a perfect pair plus one segment only A marked: (1 + 0) / (1 + 1)
    assert item_agreement([s(0, 10), s(20, 30)], [s(0, 10)]) == pytest.approx(0.5)
    assert item_agreement([s(3, 3)], [s(3, 3)]) == 1.0


def test_pooled_over_annotator_pairs():
    items = {
        "clip1": {"ann1": [s(0, 10)], "ann2": [s(0, 10)], "judge": [s(0, 5), s(20, 30)]},
        "clip2": {"ann1": [], "ann2": []},
        "clip3": {"ann1": [s(0, 1)]},  # one annotator: no pair
    }
    r = structured_agreement(items)
    # clip1 pairs: ann1-ann2 1.0; ann1-judge (0.5 + 0)/2 = 0.25; ann2-judge 0.25; clip2: 1.0
    assert r.pairs == 4
    assert r.mean_agreement == pytest.approx((1 + 0.25 + 0.25 + 1) / 4)
    assert r.mean_object_count_diff == pytest.approx((0 + 1 + 1 + 0) / 4)
    assert structured_agreement({}).mean_agreement is None


def test_bad_segment():
    with pytest.raises(ValidationError, match="ends at or after it starts"):
        Segment(start=5, end=2)
