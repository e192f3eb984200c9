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


def draw_counts(groups: list[list[int]], n_units: int, replicates: int, seed: int) -> np.ndarray:
    """The draws of `resamples` (the same ones, for the same seed) as counts: replicates x units,
    how many times each unit is drawn."""
    if not groups:
        return np.zeros((0, n_units))
    group_of = np.zeros(n_units, dtype=np.intp)
    for g, members in enumerate(groups):
        group_of[members] = g
    size = len(groups)  # one call draws what `resamples` draws a replicate at a time: the same stream
    picks = np.random.default_rng(seed).integers(0, size, (replicates, size))
    picks += np.arange(replicates)[:, None] * size
    drawn = np.bincount(picks.ravel(), minlength=replicates * size).reshape(replicates, size)
    return drawn[:, group_of].astype(float)


# the statistic of many draws at once: (ratings, draw_counts) -> one value per draw, None where undefined
DrawsStatistic = Callable[[Ratings, np.ndarray], list[float | None]]


def replicate_values(ratings: Ratings, statistic: Callable[[Ratings], Coefficient], groups: list[list[int]],
                     replicates: int, seed: int, of_draws: DrawsStatistic | None = None,
                     draws: np.ndarray | None = None) -> Iterator[float | None]:
    """The statistic of each bootstrap replicate (None where undefined): one replicate at a time,
    or with `of_draws` (the same statistic computed from draw counts) all at once, from `draws`
    where the caller has them (draw_counts of these groups, replicates and seed)."""
    if of_draws is not None:
        yield from of_draws(ratings, draw_counts(groups, len(ratings.units), replicates, seed)
                            if draws is None else draws)
        return
    for keep in resamples(groups, replicates, seed):
        yield statistic(ratings.subset(keep)).value


def bootstrap(
    ratings: Ratings,
    statistic: Callable[[Ratings], Coefficient],
    replicates: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    clusters: Sequence[Hashable] | None = None,
    progress: Callable[[int], None] | None = None,
    of_draws: DrawsStatistic | None = None,
    draws: np.ndarray | None = None,
) -> Interval:
    """Percentile interval of `statistic`. `clusters[i]` names unit i's cluster: whole
    clusters are resampled (step-level units of one conversation stay together). `of_draws`,
    where the statistic has one, computes every replicate at once (the same values), from
    `draws` where the caller has them (`draw_counts` of the same clusters, replicates and seed)."""
    if replicates < 1:
        raise ValueError("replicates must be at least 1")
    point = statistic(ratings)
    groups = groups_of(len(ratings.units), clusters)
    values: list[float] = []
    undefined = 0 if groups else replicates
    for b, value in enumerate(replicate_values(ratings, statistic, groups, replicates, seed, of_draws, draws)):
        if value is None:
            undefined += 1
        else:
            values.append(value)
        if progress is not None:
            progress(b + 1)
    alpha = (1 - level) / 2
    low = float(np.quantile(values, alpha)) if values else None
    high = float(np.quantile(values, 1 - alpha)) if values else None
    return Interval(coefficient=point.name, estimate=point.value, low=low, high=high, level=level,
                    replicates=replicates, undefined_replicates=undefined,
                    resampled="clusters" if clusters is not None else "units", undefined=point.undefined)
