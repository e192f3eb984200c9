"""Length-controlled win rates (the idea of AlpacaEval 2.0's length-controlled win rate): judges
favour longer answers, so the preference is regressed on the length difference and read off at
zero difference.

One logistic regression (statsmodels GLM, binomial family, logit link) over every graded battle
against the baseline: logit P(model beats baseline) = theta[model] + beta * tanh(d / s), where d is
the model's answer length minus the baseline's (characters) and s the standard deviation of d
over those battles. A tie is an outcome of one half (the quasi-likelihood's estimating equations
are those of a half win and a half loss). The length-controlled win rate of a model is
1 / (1 + exp(-theta[model])): its win rate had its answers been as long as the baseline's. beta,
shared by all models, is the judge's length effect on this run. Intervals are Wald intervals with
standard errors clustered by video (turns of one video are not independent)."""

from __future__ import annotations

import math
import warnings

import numpy as np
from pydantic import BaseModel

from .board import Interval


class LengthFit(BaseModel):
    rates: dict[int, Interval]
    coefficient: Interval
    scale: float | None = None


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def length_controlled(model: np.ndarray, score: np.ndarray, diff: np.ndarray, cluster: np.ndarray,
                      level: float = 0.95) -> LengthFit:
    """`model[k]` (an index), `score[k]` (1, 0.5 or 0 for the model), `diff[k]` (its length minus
    the baseline's) and `cluster[k]` of each graded battle against the baseline."""
    from scipy.stats import norm

    rates: dict[int, Interval] = {}
    kept: list[int] = []
    for m in np.unique(model):
        s = score[model == m]
        if (s == 1).all() or (s == 0).all():
            word = "won" if (s == 1).all() else "lost"
            rates[int(m)] = Interval(estimate=None, reason=f"{word} every graded battle: the regression has no finite estimate")
        else:
            kept.append(int(m))
    none = Interval(estimate=None, reason="no model both won and lost against the baseline")
    if not kept:
        return LengthFit(rates=rates, coefficient=none)
    rows = np.isin(model, kept)
    d = diff[rows].astype(float)
    scale = float(d.std())
    if scale == 0:
        why = "the answers' lengths never differ from the baseline's"
        return LengthFit(rates=rates | {m: Interval(estimate=None, reason=why) for m in kept},
                         coefficient=Interval(estimate=None, reason=why))
    import statsmodels.api as sm

    columns = {m: k for k, m in enumerate(kept)}
    x = np.zeros((int(rows.sum()), len(kept) + 1))
    x[np.arange(len(x)), [columns[int(m)] for m in model[rows]]] = 1.0
    x[:, -1] = np.tanh(d / scale)
    groups = np.unique(cluster[rows], return_inverse=True)[1]
    glm = sm.GLM(score[rows], x, family=sm.families.Binomial())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fit = glm.fit(cov_type="cluster", cov_kwds={"groups": groups}) if groups.max() > 0 else glm.fit()
        except (ValueError, np.linalg.LinAlgError) as exc:  # pragma: no cover - singular designs
            why = f"the regression failed: {exc}"
            return LengthFit(rates=rates | {m: Interval(estimate=None, reason=why) for m in kept},
                             coefficient=Interval(estimate=None, reason=why), scale=scale)
    params, se = np.asarray(fit.params), np.asarray(fit.bse)
    z = float(norm.ppf(0.5 + level / 2))
    if not (np.isfinite(params).all() and np.isfinite(se).all()) or np.abs(params).max() > 30:
        why = "the regression did not converge (the outcome is separated by the length difference)"
        return LengthFit(rates=rates | {m: Interval(estimate=None, reason=why) for m in kept},
                         coefficient=Interval(estimate=None, reason=why), scale=scale)
    for m, k in columns.items():
        rates[m] = Interval(estimate=_expit(params[k]), low=_expit(params[k] - z * se[k]),
                            high=_expit(params[k] + z * se[k]))
    b, sb = float(params[-1]), float(se[-1])
    return LengthFit(rates=rates, coefficient=Interval(estimate=b, low=b - z * sb, high=b + z * sb), scale=scale)
