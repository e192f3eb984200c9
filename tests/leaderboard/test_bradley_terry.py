"""Bradley-Terry strengths: a worked example, simulated battles with known strengths, ties, a model
that never wins, and comparison graphs in parts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from framejudge.leaderboard.stats import build_board
from tests.leaderboard.simulated import battle, simulate


def _battles(counts: dict[tuple[str, str, str], int]) -> list:
    """(model_a, model_b, winner) -> how many such battles, each on its own item."""
    out = []
    for (ma, mb, w), n in counts.items():
        out += [battle(ma, mb, w, item=f"{ma}-{mb}-{w}-{k}") for k in range(n)]
    return out


def _strength(board, model: str) -> float:
    return next(r for r in board.models if r.model == model).strength.estimate


def test_two_models_worked_by_hand():
    # A beats B 3 times in 4: the likelihood 3 log p + log(1 - p) peaks at p = 3/4, so the
    # strengths differ by logit(3/4) = log 3 (with no regularisation)
    board = build_board(_battles({("A", "B", "A"): 3, ("A", "B", "B"): 1}), replicates=20, alpha=0.0)
    assert _strength(board, "A") - _strength(board, "B") == pytest.approx(math.log(3), abs=1e-6)
    assert _strength(board, "A") == pytest.approx(-_strength(board, "B"))  # mean zero
    # the default regularisation pulls the two a little together, no more
    shrunk = build_board(_battles({("A", "B", "A"): 3, ("A", "B", "B"): 1}), replicates=20)
    assert 0.9 * math.log(3) < _strength(shrunk, "A") - _strength(shrunk, "B") < math.log(3)


def test_three_models_solve_the_likelihood_equations_and_match_a_logistic_regression():
    import statsmodels.api as sm

    # (slot A, slot B, winner's slot): A beats B 6-2, B beats C 5-3 (C in slot A twice), A beats C 7-1
    counts = {("A", "B", "A"): 6, ("A", "B", "B"): 2, ("B", "C", "A"): 5, ("B", "C", "B"): 1,
              ("C", "B", "A"): 2, ("A", "C", "A"): 7, ("A", "C", "B"): 1}
    board = build_board(_battles(counts), replicates=20, alpha=0.0)
    s = {m: _strength(board, m) for m in "ABC"}
    wins = {"A": 13, "B": 7, "C": 4}
    games = {("A", "B"): 8, ("B", "C"): 8, ("A", "C"): 8}
    # at the maximum each model's expected wins equal its wins
    for m in "ABC":
        expected = sum(n / (1 + math.exp(s[y if x == m else x] - s[m])) for (x, y), n in games.items() if m in (x, y))
        assert expected == pytest.approx(wins[m], abs=1e-6)
    # the same fit as a logistic regression on +1 / -1 indicators (C's column dropped: C = 0)
    rows, ys = [], []
    for (ma, mb, w), n in counts.items():
        x = [(m == ma) - (m == mb) for m in "AB"]
        rows += [x] * n
        ys += [1.0 if w == "A" else 0.0] * n
    fit = sm.GLM(np.array(ys), np.array(rows, float), family=sm.families.Binomial()).fit()
    assert s["A"] - s["C"] == pytest.approx(fit.params[0], abs=1e-5)
    assert s["B"] - s["C"] == pytest.approx(fit.params[1], abs=1e-5)
    assert [r.model for r in board.models] == ["A", "B", "C"] and [r.rank for r in board.models] == [1, 2, 3]


def test_ties_count_as_half_a_win_each_way():
    board = build_board(_battles({("A", "B", "A"): 2, ("A", "B", "Both"): 1, ("A", "B", "Neither"): 1}),
                        baseline="B", replicates=50, alpha=0.0)
    # A's score is 2 + 0.5 + 0.5 = 3 of 4: the same fit as 3 wins in 4
    assert _strength(board, "A") - _strength(board, "B") == pytest.approx(math.log(3), abs=1e-6)
    a = next(r for r in board.models if r.model == "A").vs_baseline
    assert (a.wins, a.both, a.neither, a.losses, a.battles) == (2, 1, 1, 0, 4)
    assert a.win_rate.estimate == pytest.approx(0.75)
    # all ties: equal strengths
    even = build_board(_battles({("A", "B", "Both"): 3, ("B", "A", "Neither"): 2}), replicates=20)
    assert _strength(even, "A") == pytest.approx(0.0, abs=1e-9) == _strength(even, "B")


def test_simulated_strengths_are_recovered_and_covered_at_about_the_stated_rate():
    truth = {"w": -0.6, "x": -0.1, "y": 0.2, "z": 0.5}
    pairs = list(itertools.combinations(truth, 2))
    covered = total = exact_order = 0
    for rep in range(30):
        board = build_board(simulate(truth, pairs, 150, seed=rep), replicates=200, seed=rep)
        for r in board.models:
            total += 1
            covered += r.strength.low <= truth[r.model] <= r.strength.high
        exact_order += [r.model for r in board.models] == ["z", "y", "x", "w"]
    assert 0.88 <= covered / total <= 0.995, covered / total
    assert exact_order >= 27, exact_order
    # the last fit's rank counts: the strongest is ranked first in most replicates, the weakest last
    ranks = {r.model: r.ranks for r in board.models}
    assert all(sum(v) == 200 for v in ranks.values())
    assert ranks["z"][0] > 100 and ranks["w"][3] > 150


def test_a_model_that_never_wins_stays_finite_and_its_interval_sits_below():
    truth = {"base": 0.0, "m": 0.3}
    out = simulate(truth, [("m", "base")], 200, seed=1)
    out += _battles({("zero", "base", "B"): 60, ("m", "zero", "A"): 40})
    board = build_board(out, baseline="base", replicates=200)
    rows = {r.model: r for r in board.models}
    z = rows["zero"]
    assert z.never_won and "never won" in z.strength.reason
    assert all(math.isfinite(v) for v in (z.strength.estimate, z.strength.low, z.strength.high))
    assert z.strength.high < min(rows[m].strength.low for m in ("base", "m")) - 2
    assert z.ranks == [0, 0, 200] and z.rank == 3
    assert z.vs_baseline.win_rate.estimate == 0.0
    assert "lost every graded battle" in z.vs_baseline.length_controlled.reason
    assert any("Never won a battle: zero" in n for n in board.notes)


def test_disconnected_parts_are_named_and_ranked_only_inside():
    out = simulate({"A": 0.4, "B": 0.0}, [("A", "B")], 80, seed=2)
    out += simulate({"C": 0.0, "D": 0.8}, [("C", "D")], 80, seed=3)
    board = build_board(out, baseline="B", replicates=100)
    assert board.components == [["A", "B"], ["C", "D"]]
    [note] = [n for n in board.notes if "cannot be ranked against each other" in n]
    assert "{A, B} | {C, D}" in note
    rows = {r.model: r for r in board.models}
    assert [r.model for r in board.models] == ["A", "B", "D", "C"]
    assert (rows["A"].component, rows["C"].component) == (0, 1)
    for part in board.components:  # centred inside each part, ranks among its own models only
        assert sum(rows[m].strength.estimate for m in part) == pytest.approx(0.0, abs=1e-9)
        assert sorted(rows[m].rank for m in part) == [1, 2]
        assert all(len(rows[m].ranks) == 2 and sum(rows[m].ranks) == 100 for m in part)
    assert rows["C"].vs_baseline.battles == 0
    assert rows["C"].vs_baseline.win_rate.estimate is None
    assert rows["C"].vs_baseline.win_rate.reason == "no graded battle against the baseline"
    # one graded battle across joins the parts
    joined = build_board(out + [battle("B", "C", "A", item="bridge")], baseline="B", replicates=20)
    assert joined.components == [["A", "B", "C", "D"]]
    assert not any("cannot be ranked" in n for n in joined.notes)


def test_exactly_tied_strengths_share_a_rank():
    # a cycle (A beats B, B beats C, C beats A) and a round of ties: three equal strengths, one
    # rank; beside them a fourth model that loses to all shares nothing
    board = build_board(_battles({("A", "B", "A"): 2, ("B", "C", "A"): 2, ("C", "A", "A"): 2,
                                  ("A", "D", "A"): 3, ("B", "D", "A"): 3, ("C", "D", "A"): 3}), replicates=50)
    rows = {r.model: r for r in board.models}
    assert [rows[m].rank for m in "ABCD"] == [1, 1, 1, 4]
    level = [_strength(board, m) for m in "ABC"]
    assert max(level) - min(level) < 1e-6
    tied = build_board(_battles({("A", "B", "Both"): 1, ("B", "C", "Both"): 1, ("C", "A", "Neither"): 1}),
                       replicates=50)
    assert [r.rank for r in tied.models] == [1, 1, 1]
    # in the replicates too: every replicate of three equal models puts each at rank 1
    assert all(r.ranks == [50, 0, 0] for r in tied.models)
