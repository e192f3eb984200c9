"""Simulated battles: models with known Bradley-Terry strengths, a judge with a length bias."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from framejudge.leaderboard.outcomes import BattleOutcome


def battle(model_a: str, model_b: str, winner: str | None, item: str = "i0", turn: int = 0,
           video: str | None = None, length_a: int = 100, length_b: int = 100, **extra) -> BattleOutcome:
    won_a = {"A": "Successful", "B": "Not Successful", "Both": "Successful", "Neither": "Not Successful"}
    won_b = {"A": "Not Successful", "B": "Successful", "Both": "Successful", "Neither": "Not Successful"}
    return BattleOutcome(item_id=item, turn=turn, video=video, model_a=model_a, model_b=model_b, winner=winner,
                         category_a=won_a.get(winner or ""), category_b=won_b.get(winner or ""),
                         length_a=length_a, length_b=length_b, error=None if winner else "timeout", **extra)


def simulate(strengths: dict[str, float], pairs: Sequence[tuple[str, str]], per_pair: int, seed: int,
             length_mean: dict[str, float] | None = None, length_bias: float = 0.0, length_scale: float = 150.0,
             videos: int | None = None) -> list[BattleOutcome]:
    """`per_pair` battles per pair, each on its own item (or on `videos` shared videos), the first
    model of each battle in slot A half the time. P(i beats j) = logistic(s_i - s_j +
    length_bias * tanh((len_i - len_j) / length_scale)); lengths are normal around
    `length_mean` (300 by default) with standard deviation 80."""
    rng = np.random.default_rng(seed)
    means = length_mean or {}
    out = []
    k = 0
    for i, j in pairs:
        for _ in range(per_pair):
            li = max(1, int(rng.normal(means.get(i, 300), 80)))
            lj = max(1, int(rng.normal(means.get(j, 300), 80)))
            logit = strengths[i] - strengths[j] + length_bias * math.tanh((li - lj) / length_scale)
            i_won = rng.random() < 1 / (1 + math.exp(-logit))
            video = None if videos is None else f"v{k % videos}"
            if rng.random() < 0.5:
                out.append(battle(i, j, "A" if i_won else "B", f"i{k}", 0, video, li, lj))
            else:
                out.append(battle(j, i, "B" if i_won else "A", f"i{k}", 0, video, lj, li))
            k += 1
    return out
