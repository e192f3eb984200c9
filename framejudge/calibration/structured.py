"""Agreement on temporal segments (where in the video the evidence is).

Objects of two annotators are matched one to one by temporal IoU (a pair counts at
IoU >= threshold, inclusive; the matching maximises the number of pairs, then their
total IoU). A matched pair with the same label contributes its IoU, with different
labels half its IoU, each unmatched segment 0; item agreement = sum / (matched pairs +
unmatched segments). Two empty annotations agree (1.0), and two identical zero-length
segments (the same instant) agree. Not chance-corrected: compare across rounds, and
read it with the mean difference in segment counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
from pydantic import BaseModel, model_validator
from scipy.optimize import linear_sum_assignment


class Segment(BaseModel):
    start: float
    end: float
    label: str = ""

    @model_validator(mode="after")
    def _order(self) -> Segment:
        if not (self.start == self.start and self.end == self.end) or self.end < self.start:
            raise ValueError(f"a segment ends at or after it starts (got {self.start}-{self.end})")
        return self


class StructuredAgreement(BaseModel):
    mean_agreement: float | None
    mean_object_count_diff: float | None
    pairs: int  # annotator pairs over all items with two or more annotators
    threshold: float


def temporal_iou(a: Segment, b: Segment) -> float:
    if a.start == a.end and b.start == b.end:
        return 1.0 if a.start == b.start else 0.0
    overlap = max(0.0, min(a.end, b.end) - max(a.start, b.start))
    union = max(a.end, b.end) - min(a.start, b.start)
    return overlap / union if union > 0 else 0.0


def match(a: Sequence[Segment], b: Sequence[Segment], threshold: float = 0.5) -> list[tuple[int, int, float]]:
    if not a or not b:
        return []
    iou = np.array([[temporal_iou(x, y) for y in b] for x in a])
    eligible = iou >= threshold
    if not eligible.any():
        return []
    # Lexicographic order: the most pairs first, then the largest total IoU. Every
    # matching has at most n = min(len(a), len(b)) pairs, and an eligible pair weighs
    # (n + 1) + IoU with IoU in [0, 1]. A matching of k eligible pairs then totals
    # between k(n + 1) and k(n + 1) + k <= k(n + 1) + n - 1 < (k + 1)(n + 1) whenever
    # k < n, so any matching with one pair more outweighs it, whatever the IoUs; among
    # matchings with the same k the totals differ only by the IoU sum. (A flat
    # 1 + IoU fails: four pairs of IoU 1 total 8 > five pairs of IoU 0.5, 7.5.)
    # Ineligible cells weigh 0 and are dropped from the solver's answer below.
    n = min(len(a), len(b))
    weight = np.where(eligible, (n + 1) + iou, 0.0)
    rows, cols = linear_sum_assignment(weight, maximize=True)
    return [(int(i), int(j), float(iou[i, j])) for i, j in zip(rows, cols) if eligible[i, j]]


def item_agreement(a: Sequence[Segment], b: Sequence[Segment], threshold: float = 0.5) -> float:
    if not a and not b:
        return 1.0
    pairs = match(a, b, threshold)
    score = sum(v if a[i].label == b[j].label else v / 2 for i, j, v in pairs)
    unmatched = (len(a) - len(pairs)) + (len(b) - len(pairs))
    return score / (len(pairs) + unmatched)


def structured_agreement(items: Mapping[str, Mapping[str, Sequence[Segment]]], threshold: float = 0.5) -> StructuredAgreement:
    """items: item -> annotator -> segments. Pooled over every annotator pair of every item."""
    scores: list[float] = []
    diffs: list[int] = []
    for by_annotator in items.values():
        for x, y in combinations(sorted(by_annotator), 2):
            a, b = by_annotator[x], by_annotator[y]
            scores.append(item_agreement(a, b, threshold))
            diffs.append(abs(len(a) - len(b)))
    return StructuredAgreement(
        mean_agreement=float(np.mean(scores)) if scores else None,
        mean_object_count_diff=float(np.mean(diffs)) if diffs else None,
        pairs=len(scores), threshold=threshold,
    )
