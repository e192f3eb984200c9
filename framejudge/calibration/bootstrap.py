"""Confidence intervals by bootstrap: over units, or over whole clusters (conversations,
traces) when units inside a cluster are not independent. Seeded; replicates where the
coefficient is undefined are counted, not dropped silently."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence

import numpy as np
from pydantic import BaseModel, model_validator

from .ratings import Ratings
from .result import Coefficient


def containing(estimate: float | None, low: float | None, high: float | None) -> tuple[float | None, float | None]:
    """The bounds widened, where needed, to hold the estimate: a percentile interval can miss its
    own estimate (every replicate agreeing up to rounding, or a skewed statistic), and an interval
    always contains what it is an interval of."""
    if estimate is None:
        return low, high
    return (None if low is None else min(low, estimate)), (None if high is None else max(high, estimate))


class Interval(BaseModel):
    """A coefficient's percentile bootstrap interval (widened, where needed, to hold the estimate)."""

    coefficient: str
    estimate: float | None
    low: float | None
    high: float | None
    level: float
    replicates: int
    undefined_replicates: int
    resampled: str  # "units" or "clusters"
    undefined: str | None = None  # why the point estimate itself has no value

    @model_validator(mode="after")
    def _holds_estimate(self) -> Interval:
        self.low, self.high = containing(self.estimate, self.low, self.high)
        return self


def groups_of(n_units: int, clusters: Sequence[Hashable] | None) -> list[list[int]]:
    """Unit indices grouped by cluster (one group per unit when there are no clusters)."""
    if clusters is None:
        return [[i] for i in range(n_units)]
    if len(clusters) != n_units:
        raise ValueError("one cluster id per unit")
    by: dict[Hashable, list[int]] = {}
    for i, c in enumerate(clusters):
        by.setdefault(c, []).append(i)
    return list(by.values())


def resamples(groups: list[list[int]], replicates: int, seed: int) -> Iterator[list[int]]:
    """Unit indices of each bootstrap replicate: whole groups drawn with replacement."""
    rng = np.random.default_rng(seed)
    for _ in range(replicates if groups else 0):
        picks = rng.integers(0, len(groups), len(groups))
        yield [i for g in picks for i in groups[g]]


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
    groups = groups_of(len(ratings.units), clusters)
    values: list[float] = []
    undefined = 0 if groups else replicates
    for b, keep in enumerate(resamples(groups, replicates, seed)):
        c = statistic(ratings.subset(keep))
        if c.value is None:
            undefined += 1
        else:
            values.append(c.value)
        if progress is not None:
            progress(b + 1)
    alpha = (1 - level) / 2
    low = float(np.quantile(values, alpha)) if values else None
    high = float(np.quantile(values, 1 - alpha)) if values else None
    return Interval(coefficient=point.name, estimate=point.value, low=low, high=high, level=level,
                    replicates=replicates, undefined_replicates=undefined,
                    resampled="clusters" if clusters is not None else "units", undefined=point.undefined)
