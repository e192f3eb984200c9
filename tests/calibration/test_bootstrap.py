"""Bootstrap intervals over units and over clusters."""

from __future__ import annotations

import numpy as np
import pytest

from framejudge.calibration import Ratings, cohen_kappa, krippendorff_alpha, percent_agreement
from framejudge.calibration.bootstrap import bootstrap


def clustered(n_clusters: int, size: int, seed: int) -> tuple[Ratings, list[int]]:
    """Whole conversations agree or disagree together: perfect within-cluster correlation."""
    rng = np.random.default_rng(seed)
    a, b, cl = [], [], []
    for c in range(n_clusters):
        agree = rng.random() < 0.7
        for _ in range(size):
            x = int(rng.integers(0, 3))
            a.append(x)
            b.append(x if agree else (x + 1) % 3)
            cl.append(c)
    return Ratings.from_columns({"judge": a, "human": b}, [0, 1, 2]), cl


def test_seeded_and_reproducible():
    r, _ = clustered(40, 1, 1)
    one = bootstrap(r, krippendorff_alpha, replicates=1000, seed=7)
    two = bootstrap(r, krippendorff_alpha, replicates=1000, seed=7)
    assert one == two and one.replicates == 1000
    assert one.low < one.estimate < one.high
    assert bootstrap(r, krippendorff_alpha, replicates=1000, seed=8).low != one.low


def test_cluster_bootstrap_is_wider_when_units_are_correlated():
    r, clusters = clustered(60, 5, 3)
    units = bootstrap(r, percent_agreement, replicates=1000, seed=1)
    whole = bootstrap(r, percent_agreement, replicates=1000, seed=1, clusters=clusters)
    assert whole.resampled == "clusters" and units.resampled == "units"
    ratio = (whole.high - whole.low) / (units.high - units.low)
    # Perfect correlation within clusters of 5: the honest interval is about sqrt(5) = 2.2x wider.
    assert 1.6 < ratio < 3.0, ratio


def test_cluster_bootstrap_matches_unit_bootstrap_when_clusters_are_singletons():
    r, _ = clustered(80, 1, 5)
    a = bootstrap(r, cohen_kappa, replicates=500, seed=2)
    b = bootstrap(r, cohen_kappa, replicates=500, seed=2, clusters=list(range(80)))
    assert (a.low, a.high) == (b.low, b.high)


def test_undefined_replicates_are_counted():
    # Two units only, one of them unanimous: many resamples contain a single category.
    r = Ratings.from_columns({"a": ["S", "N"], "b": ["S", "N"]}, ["S", "N"])
    iv = bootstrap(r, krippendorff_alpha, replicates=1000, seed=0)
    assert 300 < iv.undefined_replicates < 700
    nothing = bootstrap(Ratings([], ["S"]), krippendorff_alpha, replicates=10)
    assert nothing.estimate is None and nothing.undefined and nothing.undefined_replicates == 10
    with pytest.raises(ValueError, match="one cluster id per unit"):
        bootstrap(r, krippendorff_alpha, clusters=[1])


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_every_replicate_at_once_gives_the_values_of_one_at_a_time(level):
    """alpha_of_draws over draw_counts (one matrix product) is the replicate-by-replicate
    bootstrap: same draws, same values, same undefined replicates; three raters, absent ratings,
    units with one rating, clusters of uneven size, and draws where every value is the same."""
    from framejudge.calibration.bootstrap import draw_counts, groups_of, resamples
    from framejudge.calibration.krippendorff_alpha import alpha_of_draws

    rng = np.random.default_rng(5)
    units: list[dict] = []
    for _ in range(60):
        kept = [r for r in ("a", "b", "c") if rng.random() < 0.7]
        base = int(rng.integers(1, 4))
        units.append({r: base if rng.random() < 0.7 else int(rng.integers(1, 4)) for r in kept})
    units += [{"a": 2, "b": 2}] * 3  # a draw of these alone has no variation: undefined
    r = Ratings(units, [1, 2, 3])
    clusters = [u // 3 if u < 60 else 100 + u for u in range(len(units))]
    stat = lambda x: krippendorff_alpha(x, level)  # noqa: E731
    of_draws = lambda x, draws: alpha_of_draws(x, draws, level)  # noqa: E731
    groups = groups_of(len(units), clusters)
    counts = draw_counts(groups, len(units), 300, 11)
    one_by_one = [stat(r.subset(keep)).value for keep in resamples(groups, 300, 11)]
    assert [c.tolist() for c in counts] == [np.bincount(keep, minlength=len(units)).tolist()
                                           for keep in resamples(groups, 300, 11)]
    at_once = alpha_of_draws(r, counts, level)
    assert [v is None for v in at_once] == [v is None for v in one_by_one]
    assert np.allclose([v for v in at_once if v is not None], [v for v in one_by_one if v is not None],
                       rtol=0, atol=1e-12)
    for c in (None, clusters):
        assert bootstrap(r, stat, 300, 11, clusters=c, of_draws=of_draws) == bootstrap(r, stat, 300, 11, clusters=c)
    lonely = Ratings([{"a": 1, "b": 2}, {"a": 3}, {"b": 1}], [1, 2, 3])  # draws with no pairable unit
    draws = np.array([[0, 2, 1], [1, 0, 0]], dtype=float)
    assert alpha_of_draws(lonely, draws, level) == [None, stat(lonely.subset([0])).value]
