"""Length-controlled win rates (AlpacaEval 2.0's length-controlled win rate): judges favour longer
answers, so each model's preference over the baseline is regressed on the length difference and
read off at zero difference.

Per model, a logistic regression (statsmodels GLM, binomial family, logit link) over its graded
battles against the baseline: logit P(model beats baseline) = theta + beta * tanh(d / s), where d
is the model's answer length minus the baseline's (characters) and s the standard deviation of d
over all models' battles against the baseline. A tie is an outcome of one half (the
quasi-likelihood's estimating equations are those of a half win and a half loss). The
length-controlled win rate is 1 / (1 + exp(-theta)): the model's win rate had its answers been
as long as the baseline's. Intervals are Wald intervals with standard errors clustered by video
(turns of one video are not independent). The judge's length effect on the run is the
inverse-variance weighted mean of the models' beta. One small fit per model: the cost grows
linearly with the number of models."""

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


def _fit(score: np.ndarray, x: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray] | str:
    """(theta, beta) and their standard errors, or why there are none."""
    import statsmodels.api as sm

    if (score == 1).all() or (score == 0).all():
        word = "won" if (score == 1).all() else "lost"
        return f"{word} every graded battle: the regression has no finite estimate"
    if x.std() == 0:
        return "its answers' length difference to the baseline's never varies"
    if (x > 0).all() or (x < 0).all():
        side = "longer" if (x > 0).all() else "shorter"
        return (f"its answers are always {side} than the baseline's: zero length difference lies outside the data, "
                "and the rate there would be an extrapolation")
    if len(score) < 4:
        return "too few graded battles for the regression"
    if _separated(score, x):
        return "the outcome is separated by the length difference: the regression has no finite estimate"
    design = np.column_stack([np.ones_like(x), x])
    glm = sm.GLM(score, design, family=sm.families.Binomial())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fit = glm.fit(cov_type="cluster", cov_kwds={"groups": groups}) if len(np.unique(groups)) > 1 else glm.fit()
        except (ValueError, ZeroDivisionError, np.linalg.LinAlgError) as exc:  # pragma: no cover - degenerate data
            return f"the regression failed: {exc}"
    params, se = np.asarray(fit.params), np.asarray(fit.bse)
    if not (np.isfinite(params).all() and np.isfinite(se).all()) or np.abs(params).max() > 30:
        return "the regression did not converge (the outcome is separated by the length difference)"
    return params, se


def _separated(score: np.ndarray, x: np.ndarray) -> bool:
    """Whether a logistic fit of `score` (1, 0.5 or 0) on `x` has no finite maximum (complete or quasi-complete
    separation): some threshold has every battle with a share of a win on one side of it and every battle with
    a share of a loss on the other (a tie, which is both, on the threshold itself)."""
    wins, losses = x[score > 0], x[score < 1]
    if not len(wins) or not len(losses):
        return True
    return bool(losses.max() <= wins.min() or wins.max() <= losses.min())


def length_controlled(model: np.ndarray, score: np.ndarray, diff: np.ndarray, cluster: np.ndarray,
                      level: float = 0.95) -> LengthFit:
    """`model[k]` (an index), `score[k]` (1, 0.5 or 0 for the model), `diff[k]` (its length minus
    the baseline's) and `cluster[k]` of each graded battle against the baseline."""
    from scipy.stats import norm

    d = diff.astype(float)
    scale = float(d.std())
    if scale == 0:
        why = "the answers' lengths never differ from the baseline's"
        return LengthFit(rates={int(m): Interval(estimate=None, reason=why) for m in np.unique(model)},
                         coefficient=Interval(estimate=None, reason=why))
    z = float(norm.ppf(0.5 + level / 2))
    x = np.tanh(d / scale)
    rates: dict[int, Interval] = {}
    betas, variances = [], []
    order = np.argsort(model, kind="stable")
    bounds = np.flatnonzero(np.diff(model[order])) + 1
    for rows in np.split(order, bounds):
        m = int(model[rows[0]])
        got = _fit(score[rows], x[rows], cluster[rows])
        if isinstance(got, str):
            rates[m] = Interval(estimate=None, reason=got)
            continue
        (theta, beta), (se_theta, se_beta) = got
        rates[m] = Interval(estimate=_expit(theta), low=_expit(theta - z * se_theta), high=_expit(theta + z * se_theta))
        if se_beta > 0:
            betas.append(beta)
            variances.append(se_beta**2)
    if not betas:
        return LengthFit(rates=rates, coefficient=Interval(estimate=None, reason="no model's regression has an estimate"),
                         scale=scale)
    weights = 1 / np.asarray(variances)
    b = float((weights * np.asarray(betas)).sum() / weights.sum())
    sb = float(1 / math.sqrt(weights.sum()))
    return LengthFit(rates=rates, coefficient=Interval(estimate=b, low=b - z * sb, high=b + z * sb), scale=scale)
