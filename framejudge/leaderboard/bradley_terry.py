"""Bradley-Terry strengths from pairwise battles, fitted by choix's I-LSR on a matrix of win counts.

A tie (Both or Neither) counts as half a win for each side. Strengths are on the logit scale
(P(i beats j) = 1 / (1 + exp(s_j - s_i))), centred to mean zero inside each connected part of the
comparison graph: models in different parts were never compared, directly or through others, so
no strength says anything across parts and each part is fitted on its own."""

from __future__ import annotations

import numpy as np

# choix.ilsr_pairwise_dense starts every transition rate of its Markov chain at ALPHA: at the fixed
# point that is about 2 x ALPHA virtual comparisons each way between every two models of a part,
# which keeps a model that never wins (or never loses) finite, and is negligible beside real counts.
ALPHA = 0.01


def comparison_matrix(n_models: int, first: np.ndarray, second: np.ndarray, first_score: np.ndarray,
                      decided: np.ndarray) -> np.ndarray:
    """`m[i, j]`: wins of i over j (ties as halves) from per-pair totals: pair k is models
    (first[k], second[k]) with `decided[k]` graded battles of which `first_score[k]` went to first."""
    m = np.zeros((n_models, n_models))
    np.add.at(m, (first, second), first_score)
    np.add.at(m, (second, first), decided - first_score)
    return m


def components(comp: np.ndarray) -> np.ndarray:
    """The connected part of each model in the graph whose edges are pairs with a graded battle."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    _, labels = connected_components(csr_matrix((comp + comp.T) > 0), directed=False)
    return labels


def strengths(comp: np.ndarray, labels: np.ndarray, alpha: float = ALPHA,
              initial: np.ndarray | None = None) -> np.ndarray:
    """Strengths per model, each part fitted on its own and centred; NaN for a model alone in its
    part (no graded battle), and for a whole part whose likelihood has no finite maximum (only
    possible with alpha 0)."""
    import choix

    out = np.full(comp.shape[0], np.nan)
    for part in np.unique(labels):
        ix = np.flatnonzero(labels == part)
        if len(ix) < 2:
            continue
        sub = comp[np.ix_(ix, ix)]
        start = None if initial is None else initial[ix] - initial[ix].mean()
        try:
            try:
                params = choix.ilsr_pairwise_dense(sub, alpha=alpha, initial_params=start, max_iter=1000)
            except RuntimeError:  # not converged from the warm start: start afresh
                params = choix.ilsr_pairwise_dense(sub, alpha=alpha, max_iter=10000)
        except (RuntimeError, ValueError):  # no finite maximum (alpha 0 and a model that never wins)
            continue
        out[ix] = params - params.mean()
    return out


# strengths closer than this (logit scale) are equal: far below any difference a board can show, and
# above the fit's own rounding (the same comparisons fitted from two starts differ by about 1e-9)
TIED = 1e-6


def ranks(samples: np.ndarray) -> np.ndarray:
    """Each model's rank (1: the strongest) in each row of `samples`: one plus how many are
    stronger, so that models of equal strength share a rank (1, 1, 3)."""
    return 1 + (samples[:, None, :] > samples[:, :, None] + TIED).sum(axis=2)


def rank_counts(samples: np.ndarray, labels: np.ndarray) -> dict[int, list[int]]:
    """For each model, how many replicates (rows of `samples`) put it at rank 1, 2, ... among the
    models of its part (rank 1 the strongest; equal strengths share a rank)."""
    counts: dict[int, list[int]] = {}
    for part in np.unique(labels):
        ix = np.flatnonzero(labels == part)
        sub = samples[:, ix]
        ok = ~np.isnan(sub).any(axis=1)
        found = ranks(sub[ok]) - 1
        for k, m in enumerate(ix):
            counts[int(m)] = np.bincount(found[:, k], minlength=len(ix)).tolist()
    return counts
