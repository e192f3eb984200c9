"""Ratings: units x raters, with absent ratings absent, and a declared codebook.

A unit is whatever is rated once (a response's category, a pair's preference, one turn
or one step of a trace). An absent rating is simply not in the unit's mapping; a label
that happens to be called "Missing" is a label like any other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from numbers import Real
from typing import Any

import numpy as np

Label = Hashable


def _is_bool(label: Label) -> bool:
    return isinstance(label, bool | np.bool_)


def codebook_order(label: Label) -> tuple[Any, ...]:
    """Sort key of the default codebook: false before true, then numbers by value (int and
    float alike; NaN last), then strings, then anything else by type name and repr."""
    if _is_bool(label):
        return (0, bool(label))
    if isinstance(label, Real | Decimal):
        nan = label != label
        return (1, nan, 0 if nan else label)
    if isinstance(label, str):
        return (2, label)
    return (3, type(label).__name__, repr(label))


@dataclass
class Ratings:
    """units[i] maps rater -> label. `categories` is the declared codebook, in order
    (the order matters for ordinal and weighted coefficients; values for interval/ratio
    are the categories themselves when numeric)."""

    units: list[dict[str, Label]]
    categories: list[Label]
    unit_ids: list[Hashable] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(set(self.categories)) != len(self.categories):
            raise ValueError("the codebook lists a category twice")
        known = set(self.categories)
        for i, unit in enumerate(self.units):
            for rater, label in unit.items():
                if label not in known:
                    raise ValueError(f"unit {self.unit_id(i)!r}: rater {rater!r} gave {label!r}, not in the codebook {self.categories}")
        if self.unit_ids and len(self.unit_ids) != len(self.units):
            raise ValueError("one unit id per unit")

    def unit_id(self, i: int) -> Hashable:
        return self.unit_ids[i] if self.unit_ids else i

    @classmethod
    def from_columns(cls, columns: Mapping[str, Sequence[Label | None]], categories: Sequence[Label] | None = None) -> Ratings:
        """rater -> ratings per unit (None: no rating), as published tables are laid out.
        Without `categories` the codebook is the labels seen, in `codebook_order`."""
        raters = list(columns)
        n = {len(v) for v in columns.values()}
        if len(n) > 1:
            raise ValueError("every rater's column must cover the same units")
        size = n.pop() if n else 0
        units = [{r: columns[r][i] for r in raters if columns[r][i] is not None} for i in range(size)]
        if categories is None:
            seen: dict[Label, Label] = {}
            for u in units:
                for lab in u.values():
                    first = seen.setdefault(lab, lab)
                    if _is_bool(first) != _is_bool(lab):
                        raise ValueError(f"the ratings mix {first!r} and {lab!r}, which are one label to Python; "
                                         "write them all as numbers or all as true/false")
            categories = sorted(seen, key=codebook_order)
        return cls(units, list(categories))

    @classmethod
    def from_counts(cls, counts: Sequence[Sequence[int]], categories: Sequence[Label] | None = None) -> Ratings:
        """Units x categories count table (how many raters chose each category); raters anonymous."""
        cats: list[Label] = list(categories) if categories is not None else list(range(len(counts[0]) if counts else 0))
        units: list[dict[str, Label]] = []
        for row in counts:
            unit: dict[str, Label] = {}
            k = 0
            for cat, c in zip(cats, row):
                for _ in range(int(c)):
                    unit[f"r{k}"] = cat
                    k += 1
            units.append(unit)
        return cls(units, cats)

    @classmethod
    def from_table(cls, table: Sequence[Sequence[int]], categories: Sequence[Label] | None = None) -> Ratings:
        """A two-rater contingency table: rows rater A's category, columns rater B's."""
        cats: list[Label] = list(categories) if categories is not None else list(range(len(table)))
        units: list[dict[str, Label]] = []
        for a, row in zip(cats, table):
            for b, c in zip(cats, row):
                units.extend({"A": a, "B": b} for _ in range(int(c)))
        return cls(units, cats)

    @property
    def raters(self) -> list[str]:
        seen: dict[str, None] = {}
        for u in self.units:
            for r in u:
                seen.setdefault(r, None)
        return list(seen)

    def pairable(self) -> list[dict[str, Label]]:
        """Units with at least two ratings: the only ones that carry agreement information."""
        return [u for u in self.units if len(u) >= 2]

    def counts(self, unit: Mapping[str, Label]) -> Counter[Label]:
        return Counter(unit.values())

    def subset(self, keep: Sequence[int]) -> Ratings:
        return Ratings([self.units[i] for i in keep], self.categories,
                       [self.unit_id(i) for i in keep] if self.unit_ids else [])

    def between(self, *raters: str) -> Ratings:
        return Ratings([{r: u[r] for r in raters if r in u} for u in self.units], self.categories,
                       list(self.unit_ids))
