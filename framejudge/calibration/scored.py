"""The judge's label and confidence on each labelled unit, beside the human majority: what the
reliability of a judge's confidence and selective judging are measured on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema import LABEL_FIELDS, Verdict
from .audit import LabelRow, majority


@dataclass(frozen=True)
class Scored:
    """One labelled unit (item, turn) of one field that the judge gave a label."""

    item_id: str
    turn: int
    judge: Any
    majority: Any | None  # None: the humans tie (no gold)
    confidence: float | None  # None: no informative confidence for this field

    @property
    def correct(self) -> bool | None:
        """Whether the judge's label is the human majority's (None: there is no majority)."""
        return None if self.majority is None else self.judge == self.majority


def confidence_of(v: Verdict, field: str) -> float | None:
    """The verdict's confidence in `field`; None where it has none or it is not informative."""
    c = v.confidence
    if c is None or not c.informative:
        return None
    return c.fields.get(field)


def scored_units(humans: Sequence[LabelRow], verdicts: Iterable[Verdict], field: str) -> list[Scored]:
    """The units with a human label for `field` and a standing verdict that has the field, in
    (item, turn) order."""
    from .inputs import verdict_values

    labels: dict[tuple[str, int], list[Any]] = {}
    for row in humans:
        if row.values.get(field) is not None:
            labels.setdefault((row.item_id, row.turn), []).append(row.values[field])
    out = []
    for v in sorted(verdicts, key=lambda v: (v.item_id, v.turn)):
        key = (v.item_id, v.turn)
        value = verdict_values(v).get(field)
        if key in labels and value is not None:
            out.append(Scored(v.item_id, v.turn, value, majority(labels[key]), confidence_of(v, field)))
    return out


def rated_fields(humans: Sequence[LabelRow], verdicts: Sequence[Verdict]) -> list[str]:
    """The label fields that humans rated and the verdicts have, in their usual order."""
    from .inputs import verdict_values

    rated = {f for row in humans for f, value in row.values.items() if value is not None}
    given = {f for v in verdicts for f in verdict_values(v)}
    return [f for f in LABEL_FIELDS if f in rated and f in given]
