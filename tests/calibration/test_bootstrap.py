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
