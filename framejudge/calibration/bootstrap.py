"""Confidence intervals by bootstrap: over units, or over whole clusters (conversations,
traces) when units inside a cluster are not independent. Seeded; replicates where the
coefficient is undefined are counted, not dropped silently."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
from pydantic import BaseModel

from .ratings import Ratings
from .result import Coefficient


class Interval(BaseModel):
    coefficient: str
    estimate: float | None
    low: float | None
    high: float | None
    level: float
    replicates: int
    undefined_replicates: int
    resampled: str  # "units" or "clusters"
    undefined: str | None = None  # why the point estimate itself has no value


def bootstrap(
    ratings: Ratings,
    statistic: Callable[[Ratings], Coefficient],
    replicates: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    clusters: Sequence[Hashable] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Interval:
    """Percentile interval of `statistic`. `clusters[i]` names unit i's cluster: whole
    clusters are resampled (step-level units of one conversation stay together)."""
    if replicates < 1:
        raise ValueError("replicates must be at least 1")
    point = statistic(ratings)
    groups: list[list[int]]
    if clusters is not None:
        if len(clusters) != len(ratings.units):
            raise ValueError("one cluster id per unit")
        by: dict[Hashable, list[int]] = {}
        for i, c in enumerate(clusters):
            by.setdefault(c, []).append(i)
        groups = list(by.values())
    else:
        groups = [[i] for i in range(len(ratings.units))]
    rng = np.random.default_rng(seed)
    values: list[float] = []
    undefined = 0
    if groups:
        for b in range(replicates):
            picks = rng.integers(0, len(groups), len(groups))
            keep = [i for g in picks for i in groups[g]]
            c = statistic(ratings.subset(keep))
            if c.value is None:
                undefined += 1
            else:
                values.append(c.value)
            if progress is not None:
                progress(b + 1)
    else:
        undefined = replicates
    alpha = (1 - level) / 2
    low = float(np.quantile(values, alpha)) if values else None
    high = float(np.quantile(values, 1 - alpha)) if values else None
    return Interval(coefficient=point.name, estimate=point.value, low=low, high=high, level=level,
                    replicates=replicates, undefined_replicates=undefined,
                    resampled="clusters" if clusters is not None else "units", undefined=point.undefined)
