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


def unit_coincidences(r: Ratings) -> np.ndarray:
    """Each unit's share of the coincidence matrix (units x q x q; zero for a unit with fewer than
    two ratings): the matrix of any draw of the units, repeats included, is the sum of theirs."""
    index = {c: i for i, c in enumerate(r.categories)}
    q = len(r.categories)
    counts = np.zeros((len(r.units), q))
    for i, unit in enumerate(r.units):
        for label in unit.values():
            counts[i, index[label]] += 1
    m = counts.sum(axis=1)
    out = counts[:, :, None] * counts[:, None, :]
    out[:, np.arange(q), np.arange(q)] -= counts
    out /= np.where(m >= 2, m - 1, np.inf)[:, None, None]  # a unit with one rating adds nothing
    return out


def alpha_of_draws(r: Ratings, draws: np.ndarray, level: Level = "nominal") -> list[float | None]:
    """Alpha of each row of `draws` (draws x units: how many times each unit of `r` is drawn), as
    `krippendorff_alpha` gives it for the ratings of that draw, None where it is undefined; the
    coincidences of every draw come from one matrix product (a bootstrap's replicates at once)."""
    q = len(r.categories)
    per_unit = unit_coincidences(r).reshape(len(r.units), q * q)
    pairable = np.array([len(u) >= 2 for u in r.units], dtype=float)
    matrices = (draws @ per_unit).reshape(-1, q, q)
    paired = draws @ pairable > 0
    if not paired.any():
        return [None] * len(draws)
    n_c = matrices.sum(axis=2)
    if level == "ordinal":  # its distances depend on each draw's marginals
        d2 = np.stack([_delta2(r, row, level) if ok else np.zeros((q, q)) for row, ok in zip(n_c, paired)])
    else:
        d2 = np.broadcast_to(_delta2(r, n_c[0], level), matrices.shape)
    flat = (len(draws), q * q)
    d_o = (matrices * d2).reshape(flat).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        d_e = (n_c[:, :, None] * n_c[:, None, :] * d2).reshape(flat).sum(axis=1) / (n_c.sum(axis=1) - 1)
        alpha = 1 - d_o / d_e
    return [float(a) if ok and e != 0 else None for a, e, ok in zip(alpha, d_e, paired)]
