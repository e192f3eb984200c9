"""Leaderboard benchmark: building the table (win rates, category shares, Bradley-Terry strengths
and ranks, length-controlled rates, all with their bootstrap) from simulated battle outcomes.

    python bench/leaderboard.py [--quick] [--replicates 1000] [--turns 2000] [--models 5,10,20,40] [--runs 5]

Each size runs in a fresh process (numerical libraries held to 2 threads), median of 5 runs;
seconds are `build_board` alone, MB the process's peak memory above its size before the call.
Two plans with the same number of battles: every model against the baseline on every turn
((models - 1) x turns battles), and all pairs with that budget spread evenly. Turns are 2 per
video. The growth with the number of models is measured against the ideal, linear growth from
the smallest size in the same run (seconds per model constant), beside what quadratic growth
would give.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def outcomes(models: int, turns: int, plan: str, seed: int = 0) -> list:
    import numpy as np

    from framejudge.leaderboard.outcomes import BattleOutcome

    rng = np.random.default_rng(seed)
    names = [f"model-{k:02d}" for k in range(models)]
    strength = dict(zip(names, rng.normal(0, 0.5, models)))
    length = dict(zip(names, rng.normal(400, 100, models)))
    if plan == "baseline":
        battles = [(t, m, names[0]) for t in range(turns) for m in names[1:]]
    else:  # all pairs, the same budget spread evenly: the pairs taken in turn, turn after turn
        pairs = list(itertools.combinations(names, 2))
        budget = (models - 1) * turns
        battles = [(k % turns, *pairs[k % len(pairs)]) for k in range(budget)]
    out = []
    for t, i, j in battles:
        li, lj = int(rng.normal(length[i], 80)), int(rng.normal(length[j], 80))
        logit = strength[i] - strength[j] + 0.8 * np.tanh((li - lj) / 150)
        r = rng.random()
        p = 1 / (1 + np.exp(-logit))
        winner = "Both" if r < 0.05 else "Neither" if r < 0.1 else "A" if rng.random() < p else "B"
        cat = {"A": ("Successful", "Not Successful"), "B": ("Not Successful", "Successful"),
               "Both": ("Successful", "Successful"), "Neither": ("Not Successful", "Not Successful")}[winner]
        out.append(BattleOutcome(item_id=f"item-{t // 2}", turn=t % 2, video=f"video-{t // 2}", model_a=i, model_b=j,
                                 winner=winner, category_a=cat[0], category_b=cat[1], length_a=max(1, li),
                                 length_b=max(1, lj), swap_consistent=bool(rng.random() < 0.85),
                                 domain=("garden", "kitchen", "street")[t % 3]))
    return out


def one(models: int, turns: int, plan: str, replicates: int) -> dict:
    from framejudge.leaderboard.stats import build_board

    battles = outcomes(models, turns, plan)
    build_board(battles[:50], replicates=5)  # imports (statsmodels, choix) outside the timing
    before = _rss_mb()
    start = time.perf_counter()
    board = build_board(battles, replicates=replicates, seed=1)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"models": models, "plan": plan, "battles": len(battles), "clusters": board.clusters, "seconds": seconds,
            "mb": max(0.0, peak - before), "rss_mb": peak}


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="200 replicates, one run per size")
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--models", default="5,10,20,40")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--one", nargs=3, metavar=("MODELS", "PLAN", "REPLICATES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.turns, args.one[1], int(args.one[2]))))
        return
    replicates, runs = (200, 1) if args.quick else (args.replicates, args.runs)
    sizes = [int(m) for m in args.models.split(",")]
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2", MKL_NUM_THREADS="2",
               PYTHONPATH=str(ROOT))
    print(f"{args.turns} turns (2 per video), {replicates} bootstrap replicates, median of {runs}; "
          f"{os.cpu_count()} cores, numerical libraries held to 2 threads")
    print("| plan | models | battles | seconds | MB | seconds per model | vs linear ideal | quadratic would be |")
    print("|---|---|---|---|---|---|---|---|")
    for plan in ("baseline", "all pairs"):
        first = None
        for m in sizes:
            got = [json.loads(subprocess.run([sys.executable, __file__, "--turns", str(args.turns), "--one", str(m),
                                              plan, str(replicates)], env=env, check=True, capture_output=True,
                                             text=True).stdout) for _ in range(runs)]
            s = statistics.median(g["seconds"] for g in got)
            mb = statistics.median(g["mb"] for g in got)
            first = first or (m, s)
            linear = first[1] * m / first[0]
            quadratic = first[1] * (m / first[0]) ** 2
            print(f"| {plan} | {m} | {got[0]['battles']:,} | {s:.2f} | {mb:.0f} | {s / m:.3f} | "
                  f"{s / linear:.2f}x | {quadratic / linear:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
