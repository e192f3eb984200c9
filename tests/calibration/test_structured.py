"""Structured (segment) agreement: hand-computed cases."""

from __future__ import annotations

import numpy as np
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


def test_more_pairs_beat_better_pairs_however_many_compete():
    # Four perfect pairs (IoU 1) against five pairs of IoU 0.5: the five win.
    a = [s(0, 1), s(0, 2), s(0, 4), s(0, 8), s(-1, 1)]
    b = [s(0, 1), s(0, 2), s(0, 4), s(0, 8), s(0, 16)]
    pairs = match(a, b, 0.5)
    assert sorted((i, j) for i, j, _ in pairs) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]
    assert all(v == pytest.approx(0.5) for _, _, v in pairs)
    assert item_agreement(a, b) == pytest.approx(0.5)


def test_same_number_of_pairs_keeps_the_most_overlap():
    # Both assignments pair both segments; the one with total IoU 2 beats 1.6.
    a = [s(0, 10), s(0, 8)]
    b = [s(0, 10), s(0, 8)]
    assert sorted((i, j) for i, j, _ in match(a, b, 0.5)) == [(0, 0), (1, 1)]


def best_by_search(a, b, threshold):
    """(pairs, total IoU) of the lexicographically best matching, by exhaustive search."""
    iou = [[temporal_iou(x, y) for y in b] for x in a]

    def go(i, used):
        if i == len(a):
            return (0, 0.0)
        best = go(i + 1, used)
        for j in range(len(b)):
            if j not in used and iou[i][j] >= threshold:
                k, total = go(i + 1, used | {j})
                best = max(best, (k + 1, total + iou[i][j]))
        return best

    return go(0, frozenset())


def nested(rng):
    """Up to 7 segments ending at distinct powers of two, most starting at 0: many close
    overlaps compete, as in the case above."""
    ends = rng.permutation([1, 2, 4, 8, 16, 32, 64])[: rng.integers(0, 8)]
    return [s(int(rng.choice([0, 0, 0, 0, -1, 1])), int(e)) for e in ends]


@pytest.mark.parametrize("threshold", [0.3, 0.5])
def test_matching_agrees_with_exhaustive_search(threshold):
    rng = np.random.default_rng(7)
    for _ in range(1000):
        a, b = nested(rng), nested(rng)
        pairs = match(a, b, threshold)
        assert len({i for i, _, _ in pairs}) == len({j for _, j, _ in pairs}) == len(pairs)
        assert all(v >= threshold for _, _, v in pairs)
        k, total = best_by_search(a, b, threshold)
        assert len(pairs) == k
        assert sum(v for _, _, v in pairs) == pytest.approx(total)


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
