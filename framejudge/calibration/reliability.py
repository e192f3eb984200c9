"""How well a judge's confidence predicts its agreement with the human majority, per field.

A unit's label is right when it equals the human majority; units whose humans tie, and units
without an informative confidence, are left out and counted. Binning: 10 equal-width bins of
confidence over [0, 1], each [low, high) and the last [0.9, 1.0] (a confidence of 1 falls in it).

- Expected calibration error (ECE): the bins' |accuracy - mean confidence|, weighted by their
  share of the units: 0 for a judge whose confidence is its hit rate.
- Brier score: the mean of (confidence - right)^2, right being 1 or 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from ..schema import JudgeError, Verdict
    from .audit import LabelRow
    from .scored import Scored

BINS = 10


class ReliabilityBin(BaseModel):
    low: float
    high: float
    count: int
    mean_confidence: float | None  # None: an empty bin
    accuracy: float | None


class FieldReliability(BaseModel):
    field: str
    informative: bool = Field(description="false: no verdict has an informative confidence for this field, so "
                                          "nothing is measured (a deterministic judge's is not taken as 1.0)")
    units: int = Field(description="units measured: a human majority and an informative confidence")
    no_majority: int = Field(description="left out: the humans tie")
    no_confidence: int = Field(description="left out: no informative confidence")
    ece: float | None = None
    brier: float | None = None
    bins: list[ReliabilityBin] = Field(default_factory=list)


def calibration_error(confidence: Sequence[float], right: Sequence[bool], bins: int = BINS,
                      ) -> tuple[float | None, float | None, list[ReliabilityBin]]:
    """(ECE, Brier score, the reliability diagram's bins) of confidences against right/wrong."""
    conf = np.asarray(confidence, dtype=float)
    hit = np.asarray(right, dtype=float)
    if conf.shape != hit.shape:
        raise ValueError("one right/wrong per confidence")
    if np.any((conf < 0) | (conf > 1) | np.isnan(conf)):
        raise ValueError("confidences are in [0, 1]")
    edges = np.linspace(0.0, 1.0, bins + 1)
    index = np.minimum((conf * bins).astype(int), bins - 1)
    out = []
    ece = 0.0
    for b in range(bins):
        inside = index == b
        count = int(inside.sum())
        mean_c = float(conf[inside].mean()) if count else None
        acc = float(hit[inside].mean()) if count else None
        if count:
            ece += count / len(conf) * abs(acc - mean_c)  # type: ignore[operator]
        out.append(ReliabilityBin(low=float(edges[b]), high=float(edges[b + 1]), count=count,
                                  mean_confidence=mean_c, accuracy=acc))
    if not len(conf):
        return None, None, out
    return float(ece), float(np.mean((conf - hit) ** 2)), out


def field_reliability(field: str, units: Sequence[Scored], bins: int = BINS) -> FieldReliability:
    measured = [u for u in units if u.correct is not None and u.confidence is not None]
    no_majority = sum(u.correct is None for u in units)
    no_confidence = sum(u.correct is not None and u.confidence is None for u in units)
    informative = any(u.confidence is not None for u in units)
    if not informative:
        return FieldReliability(field=field, informative=False, units=0, no_majority=no_majority,
                                no_confidence=no_confidence)
    ece, brier, diagram = calibration_error([u.confidence for u in measured],  # type: ignore[misc]
                                            [bool(u.correct) for u in measured], bins)
    return FieldReliability(field=field, informative=True, units=len(measured), no_majority=no_majority,
                            no_confidence=no_confidence, ece=ece, brier=brier, bins=diagram)


def reliability(humans: Sequence[LabelRow], records: Sequence[Verdict | JudgeError],
                bins: int = BINS) -> list[FieldReliability] | None:
    """Per label field that humans rated and the verdicts have; None when no verdict carries a
    confidence at all (verdicts of a framejudge that did not record it)."""
    from ..records import latest
    from .scored import rated_fields, scored_units

    verdicts = list(latest(list(records))[0].values())
    if not any(v.confidence is not None for v in verdicts):
        return None
    return [field_reliability(f, scored_units(humans, verdicts, f), bins) for f in rated_fields(humans, verdicts)]
