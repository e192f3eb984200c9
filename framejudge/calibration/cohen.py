"""Cohen's kappa for two raters: unweighted, or linear/quadratic weights over the declared order.

Convention: complete cases only (units both raters rated); marginals over the declared
codebook, so a category nobody used still counts as a possible value.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .ratings import Ratings
from .result import Coefficient

Weights = Literal["none", "linear", "quadratic"]


def confusion(r: Ratings, a: str, b: str) -> np.ndarray:
    index = {c: i for i, c in enumerate(r.categories)}
    m = np.zeros((len(r.categories), len(r.categories)))
    for unit in r.units:
        if a in unit and b in unit:
            m[index[unit[a]], index[unit[b]]] += 1
    return m


def cohen_kappa(r: Ratings, a: str | None = None, b: str | None = None, weights: Weights = "none") -> Coefficient:
    raters = r.raters
    if a is None or b is None:
        if len(raters) != 2:
            return Coefficient.undefined_because("cohen_kappa", f"Cohen's kappa compares two raters; found {len(raters)}",
                                                 len(r.units), len(raters))
        a, b = raters
    name = "cohen_kappa" if weights == "none" else f"cohen_kappa_{weights}"
    m = confusion(r, a, b)
    n = m.sum()
    if n == 0:
        return Coefficient.undefined_because(name, f"no unit was rated by both {a} and {b}", 0, 2)
    q = len(r.categories)
    i, j = np.indices((q, q))
    if weights == "none":
        w = (i == j).astype(float)
    elif q < 2:
        w = np.ones((q, q))
    elif weights == "linear":
        w = 1 - np.abs(i - j) / (q - 1)
    else:
        w = 1 - ((i - j) / (q - 1)) ** 2
    p = m / n
    po = (w * p).sum()
    pe = (w * np.outer(p.sum(axis=1), p.sum(axis=0))).sum()
    if pe >= 1 - 1e-12:
        used = r.categories[int(np.argmax(p.sum(axis=1)))]
        return Coefficient.undefined_because(
            name, f"both raters rated every unit {used!r}: chance agreement is 1", int(n), 2)
    return Coefficient(name=name, value=float((po - pe) / (1 - pe)), units=int(n), raters=2,
                       observed=float(po), expected=float(pe))
