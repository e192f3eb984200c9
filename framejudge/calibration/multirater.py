"""Percent agreement, Fleiss' kappa, Gwet's AC1 and PABAK for any number of raters.

Convention for missing ratings (Gwet 2014, as in irrCAC): observed agreement is the
mean over units with two or more ratings of the share of agreeing rating pairs; the
category prevalences pi_k are the mean over rated units of the share of a unit's ratings
in category k. Fleiss' chance agreement is sum pi_k^2, Gwet's AC1 uses
sum pi_k (1 - pi_k) / (q - 1), PABAK uses 1/q. AC1 and PABAK stay informative where
one category dominates (most responses are Successful) and kappa collapses.
"""

from __future__ import annotations

import numpy as np

from .ratings import Ratings
from .result import Coefficient


def _tables(r: Ratings) -> tuple[np.ndarray, np.ndarray]:
    index = {c: i for i, c in enumerate(r.categories)}
    counts = np.zeros((len(r.units), len(r.categories)))
    for u, unit in enumerate(r.units):
        for label in unit.values():
            counts[u, index[label]] += 1
    totals = counts.sum(axis=1)
    return counts, totals


def _observed(counts: np.ndarray, totals: np.ndarray) -> tuple[float | None, int]:
    keep = totals >= 2
    if not keep.any():
        return None, 0
    c, t = counts[keep], totals[keep]
    per_unit = (c * (c - 1)).sum(axis=1) / (t * (t - 1))
    return float(per_unit.mean()), int(keep.sum())


def _prevalence(counts: np.ndarray, totals: np.ndarray) -> np.ndarray:
    rated = totals >= 1
    return (counts[rated] / totals[rated, None]).mean(axis=0)


def percent_agreement(r: Ratings) -> Coefficient:
    counts, totals = _tables(r)
    pa, n = _observed(counts, totals)
    if pa is None:
        return Coefficient.undefined_because("percent_agreement", "no unit has two or more ratings", 0, len(r.raters))
    return Coefficient(name="percent_agreement", value=pa, units=n, raters=len(r.raters), observed=pa)


def _chance_corrected(name: str, r: Ratings, pe_of) -> Coefficient:
    counts, totals = _tables(r)
    pa, n = _observed(counts, totals)
    if pa is None:
        return Coefficient.undefined_because(name, "no unit has two or more ratings", 0, len(r.raters))
    pi = _prevalence(counts, totals)
    pe = float(pe_of(pi, len(r.categories)))
    if pe >= 1:
        used = [r.categories[i] for i in np.flatnonzero(pi)]
        return Coefficient.undefined_because(name, f"every rating is {used[0]!r}: chance agreement is 1", n, len(r.raters))
    return Coefficient(name=name, value=(pa - pe) / (1 - pe), units=n, raters=len(r.raters), observed=pa, expected=pe)


def fleiss_kappa(r: Ratings) -> Coefficient:
    return _chance_corrected("fleiss_kappa", r, lambda pi, q: (pi**2).sum())


def gwet_ac1(r: Ratings) -> Coefficient:
    if len(r.categories) < 2:
        return Coefficient.undefined_because("gwet_ac1", "the codebook has fewer than two categories")
    return _chance_corrected("gwet_ac1", r, lambda pi, q: (pi * (1 - pi)).sum() / (q - 1))


def pabak(r: Ratings) -> Coefficient:
    """Prevalence- and bias-adjusted kappa (Brennan-Prediger): chance agreement 1/q."""
    if len(r.categories) < 2:
        return Coefficient.undefined_because("pabak", "the codebook has fewer than two categories")
    return _chance_corrected("pabak", r, lambda pi, q: 1.0 / q)
