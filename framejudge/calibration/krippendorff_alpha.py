"""Krippendorff's alpha for any number of raters, missing ratings, and four metric levels.

Convention (Krippendorff 2011): only pairable values count, i.e. units with at least
two ratings; a unit's m ratings contribute 1/(m-1) to the coincidence of each ordered
pair of its values. Alpha = 1 - D_o / D_e; undefined when no unit is pairable or when
the pairable values use a single category (D_e = 0).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .ratings import Ratings
from .result import Coefficient

Level = Literal["nominal", "ordinal", "interval", "ratio"]


def coincidences(r: Ratings) -> np.ndarray:
    index = {c: i for i, c in enumerate(r.categories)}
    q = len(r.categories)
    o = np.zeros((q, q))
    for unit in r.pairable():
        m = len(unit)
        counts = np.zeros(q)
        for label in unit.values():
            counts[index[label]] += 1
        o += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    return o


def _delta2(r: Ratings, n_c: np.ndarray, level: Level) -> np.ndarray:
    q = len(r.categories)
    if level == "nominal":
        return 1.0 - np.eye(q)
    if level == "ordinal":
        d = np.zeros((q, q))
        for c in range(q):
            for k in range(q):
                lo, hi = min(c, k), max(c, k)
                d[c, k] = (n_c[lo : hi + 1].sum() - (n_c[c] + n_c[k]) / 2) ** 2
        return d
    try:
        v = np.array([float(c) for c in r.categories])  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{level} alpha needs numeric categories, got {r.categories}") from None
    diff = v[:, None] - v[None, :]
    if level == "interval":
        return diff**2
    total = v[:, None] + v[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(total == 0, 0.0, (diff / np.where(total == 0, 1, total)) ** 2)
    return d


def krippendorff_alpha(r: Ratings, level: Level = "nominal") -> Coefficient:
    name = f"krippendorff_alpha_{level}"
    pairable = r.pairable()
    if not pairable:
        return Coefficient.undefined_because(name, "no unit has two or more ratings", 0, len(r.raters))
    o = coincidences(r)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    d2 = _delta2(r, n_c, level)
    d_o = (o * d2).sum()
    d_e = (np.outer(n_c, n_c) * d2).sum() / (n - 1)
    if d_e == 0:
        used = [r.categories[i] for i in np.flatnonzero(n_c)]
        return Coefficient.undefined_because(
            name, f"every pairable rating is {used[0]!r}: no variation, so chance disagreement is 0",
            len(pairable), len(r.raters))
    return Coefficient(name=name, value=float(1 - d_o / d_e), units=len(pairable), raters=len(r.raters),
                       observed=float(1 - d_o / n), expected=float(1 - d_e / n))
