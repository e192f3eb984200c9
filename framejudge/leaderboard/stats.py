"""The leaderboard table from battle outcomes: win rates against a baseline, category shares,
Bradley-Terry strengths and ranks, length-controlled win rates, per-slice tables and the judge's
biases.

Intervals are percentile bootstraps over clusters: a turn's cluster is its video (turns of one
video are not independent), or its item when it has none. Each replicate draws the clusters once
and every statistic of every model is computed from per-cluster totals (one matrix product per
statistic), so the bootstrap's cost grows with clusters x models, not with pairs of models; the
Bradley-Terry fit of each replicate runs on that replicate's pair totals."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import bradley_terry as bt
from .board import Bias, Board, Interval, ModelRow, VsBaseline, tie_words
from .length import length_controlled
from .outcomes import BattleOutcome

if TYPE_CHECKING:
    from ..rubrics.model import Rubric

# A's score; a tie is half a win for each side, whether both answers were good (Both) or bad (Neither)
SCORE = {"A": 1.0, "B": 0.0, "Both": 0.5, "Neither": 0.5}
SUCCESSFUL = "Successful"
NO_VALUE = "(none)"
CHUNK = 250  # replicates drawn at a time (bounds memory: CHUNK x clusters weights)


def _interval(point: float | None, samples: np.ndarray, level: float, why: str) -> Interval:
    if point is None or not np.isfinite(point):
        return Interval(estimate=None, reason=why)
    ok = samples[np.isfinite(samples)]
    if not len(ok):
        return Interval(estimate=float(point))
    lo, hi = np.percentile(ok, [50 * (1 - level), 50 * (1 + level)])
    return Interval(estimate=float(point), low=float(lo), high=float(hi))


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def slice_value(o: BattleOutcome, key: str) -> str:
    """The outcome's value for a slice key: domain, task_type, or a metadata field."""
    v: Any = getattr(o, key) if key in ("domain", "task_type") else o.metadata.get(key)
    return NO_VALUE if v is None else str(v)


def check_slice_keys(by: Sequence[str], fields: set[str]) -> None:
    """ValueError for a slice key given twice, or one that is neither domain, task_type nor one of
    the metadata `fields` the battles have (its one slice, "(none)", would be the whole table)."""
    for k, key in enumerate(by):
        if key in by[:k]:
            raise ValueError(f"by: {key!r} is given twice")
        if key not in ("domain", "task_type") and key not in fields:
            shown = key if len(key) <= 60 else key[:57] + "..."
            raise ValueError(f"by: no battle has a field {shown!r} (domain, task_type, or a metadata field: "
                             f"{', '.join(sorted(fields)) or 'these battles have none'})")


def _default_baseline(outcomes: Sequence[BattleOutcome]) -> str:
    counts = Counter(m for o in outcomes for m in (o.model_a, o.model_b))
    return min(counts, key=lambda m: (-counts[m], m))


def build_board(outcomes: Sequence[BattleOutcome], baseline: str | None = None, replicates: int = 1000,
                seed: int = 0, by: Sequence[str] = (), level: float = 0.95, alpha: float = bt.ALPHA,
                rubric: Rubric | None = None) -> Board:
    """The table. `baseline` defaults to the model in the most battles (the first by name among
    equals); `by` names slice keys (domain, task_type or metadata fields), each giving the same
    table per value, against the same baseline; `rubric`, the one the battles were graded under,
    names the board's tie columns in its words (`Board.ties`)."""
    if not outcomes:
        raise ValueError("no battles to build a leaderboard from")
    if replicates < 1:
        raise ValueError("replicates must be at least 1")
    if not 0 < level < 1:
        raise ValueError("level must be between 0 and 1")
    for o in outcomes:
        if o.model_a == o.model_b:
            raise ValueError(f"item {o.item_id!r} turn {o.turn}: a battle of {o.model_a!r} against itself")
    names = {m for o in outcomes for m in (o.model_a, o.model_b)}
    check_slice_keys(by, {k for o in outcomes for k in o.metadata})
    if baseline is None:
        baseline = _default_baseline(outcomes)
    elif baseline not in names:
        raise ValueError(f"baseline {baseline!r} is in no battle (models: {', '.join(sorted(names))})")
    board = _table(outcomes, baseline, replicates, seed, level, alpha)
    board.by = list(by)
    board.ties = tie_words(rubric)
    board.rubric = f"{rubric.id} {rubric.version}" if rubric is not None else None
    for key in by:
        groups: dict[str, list[BattleOutcome]] = {}
        for o in outcomes:
            groups.setdefault(slice_value(o, key), []).append(o)
        board.slices[key] = {value: _table(group, baseline if any(baseline in (o.model_a, o.model_b) for o in group)
                                           else None, replicates, seed, level, alpha)
                             for value, group in sorted(groups.items())}
        for sub in board.slices[key].values():
            sub.ties, sub.rubric = board.ties, board.rubric
    return board


def _table(outcomes: Sequence[BattleOutcome], baseline: str | None, replicates: int, seed: int,
           level: float, alpha: float) -> Board:
    names = sorted({m for o in outcomes for m in (o.model_a, o.model_b)})
    idx = {m: k for k, m in enumerate(names)}
    n = len(names)
    cluster_of: dict[str, int] = {}
    base = idx.get(baseline) if baseline is not None else None

    def cluster(o: BattleOutcome) -> int:
        key = f"video:{o.video}" if o.video is not None else f"item:{o.item_id}"
        return cluster_of.setdefault(key, len(cluster_of))

    # per-battle arrays
    a = np.array([idx[o.model_a] for o in outcomes])
    b = np.array([idx[o.model_b] for o in outcomes])
    c = np.array([cluster(o) for o in outcomes])
    graded = np.array([o.winner is not None for o in outcomes])
    score_a = np.array([SCORE.get(o.winner or "", 0.0) for o in outcomes])
    n_clusters = len(cluster_of)

    battles = np.bincount(a, minlength=n) + np.bincount(b, minlength=n)
    errors = np.bincount(a[~graded], minlength=n) + np.bincount(b[~graded], minlength=n)
    answered = {(m, o.item_id, o.turn) for o in outcomes for m in (o.model_a, o.model_b)}
    turns = Counter(m for m, _, _ in answered)

    # pairs: per-cluster totals of graded battles and of the lower-indexed model's score
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    pair_ids, pair_of = np.unique(lo * n + hi, return_inverse=True)
    first, second = pair_ids // n, pair_ids % n
    first_score = np.where(a == lo, score_a, 1 - score_a)
    pair_n = np.zeros((n_clusters, len(pair_ids)))
    pair_s = np.zeros_like(pair_n)
    np.add.at(pair_n, (c[graded], pair_of[graded]), 1.0)
    np.add.at(pair_s, (c[graded], pair_of[graded]), first_score[graded])

    # against the baseline: per-cluster graded battles and the other model's score
    vs = np.zeros((n_clusters, n))
    vs_s = np.zeros_like(vs)
    with_base = (a == base) | (b == base) if base is not None else np.zeros(len(a), bool)
    other = np.where(a == base, b, a)
    own_score = np.where(a == base, 1 - score_a, score_a)
    mine = graded & with_base
    np.add.at(vs, (c[mine], other[mine]), 1.0)
    np.add.at(vs_s, (c[mine], other[mine]), own_score[mine])
    winner = np.array([o.winner or "" for o in outcomes])
    tally = {kind: np.bincount(other[sel], minlength=n) for kind, sel in (
        ("battles", with_base), ("errors", with_base & ~graded), ("wins", mine & (own_score == 1)),
        ("losses", mine & (own_score == 0)), ("both", mine & (winner == "Both")),
        ("neither", mine & (winner == "Neither")))}

    # answers' categories: per-cluster graded answers and Successful ones
    answers = np.zeros((n_clusters, n))
    succ = np.zeros_like(answers)
    cats: list[Counter[str]] = [Counter() for _ in names]
    for k, o in enumerate(outcomes):
        if o.winner is None:
            continue
        for m, cat in ((a[k], o.category_a), (b[k], o.category_b)):
            if cat is not None:
                cats[m][cat] += 1
                answers[c[k], m] += 1
                succ[c[k], m] += cat == SUCCESSFUL

    comp = bt.comparison_matrix(n, first, second, pair_s.sum(0), pair_n.sum(0))
    labels = bt.components(comp)
    has_graded = (comp + comp.T).sum(1) > 0
    point = bt.strengths(comp, labels, alpha)

    # the bootstrap: clusters drawn once per replicate, all statistics from the same draw
    rng = np.random.default_rng(seed)
    boot_win = np.empty((replicates, n))
    boot_succ = np.empty((replicates, n))
    boot_str = np.empty((replicates, n))
    uniform = np.full(n_clusters, 1.0 / n_clusters)
    for start in range(0, replicates, CHUNK):
        r = min(CHUNK, replicates - start)
        w = rng.multinomial(n_clusters, uniform, size=r).astype(float)
        rows = slice(start, start + r)
        boot_win[rows] = _ratio(w @ vs_s, w @ vs)
        boot_succ[rows] = _ratio(w @ succ, w @ answers)
        pn, ps = w @ pair_n, w @ pair_s
        for k in range(r):
            boot_str[start + k] = bt.strengths(bt.comparison_matrix(n, first, second, ps[k], pn[k]), labels,
                                               alpha, initial=point)
    rank_counts = bt.rank_counts(boot_str, labels)
    point_ranks = bt.rank_counts(point[None, :], labels)
    graded_ix = np.flatnonzero(has_graded)

    # the length regression against the baseline
    lengths = np.array([[o.length_a, o.length_b] for o in outcomes], dtype=float)
    diff = np.where(a == base, lengths[:, 1] - lengths[:, 0], lengths[:, 0] - lengths[:, 1])
    fit = length_controlled(other[mine], own_score[mine], diff[mine], c[mine], level) if mine.any() else None

    # parts of the graph: only models with a graded battle belong to one with others
    parts: dict[int, list[str]] = {}
    for m in graded_ix:
        parts.setdefault(int(labels[m]), []).append(names[m])
    ordered = sorted(parts.values(), key=lambda p: (baseline not in p, -len(p), p))
    part_index = {m: k for k, p in enumerate(ordered) for m in p}
    notes: list[str] = []
    if len(ordered) > 1:
        notes.append("The comparison graph falls into parts that were never compared, directly or through other "
                     "models: " + " | ".join("{" + ", ".join(p) + "}" for p in ordered) + ". Models in different "
                     "parts cannot be ranked against each other; strengths and ranks compare only inside one part.")
    lonely = [names[m] for m in range(n) if not has_graded[m]]
    if lonely:
        notes.append(f"No graded battle (every one failed): {', '.join(lonely)}; no strength or rank.")

    rows_out: list[ModelRow] = []
    never = []
    for m, name in enumerate(names):
        won = float(comp[m].sum())
        never_won = bool(has_graded[m] and won == 0)
        if never_won:
            never.append(name)
        vsb = None
        if m != base:
            w_total = vs[:, m].sum()
            why = "no graded battle against the baseline" if base is not None else "no baseline in these battles"
            win_point = float(vs_s[:, m].sum() / w_total) if w_total else None
            lc = (fit.rates.get(m) if fit is not None else None) or Interval(estimate=None, reason=why)
            vsb = VsBaseline(**{kind: int(t[m]) for kind, t in tally.items()},
                             win_rate=_interval(win_point, boot_win[:, m], level, why), length_controlled=lc)
        total = sum(cats[m].values())
        succ_point = cats[m][SUCCESSFUL] / total if total else None
        strength = _interval(None if np.isnan(point[m]) else float(point[m]), boot_str[:, m], level,
                             "no graded battle" if not has_graded[m] else
                             "no finite maximum-likelihood strength without regularisation")
        if never_won:
            strength.reason = ("never won: its strength is held finite only by the regularisation, and the "
                               "interval's bounds say only that it sits below the others")
        rows_out.append(ModelRow(
            model=name, battles=int(battles[m]), turns=turns[name], errors=int(errors[m]), vs_baseline=vsb,
            categories=dict(sorted(cats[m].items())),
            category_shares={k: v / total for k, v in sorted(cats[m].items())},
            successful=_interval(succ_point, boot_succ[:, m], level, "no graded answer with a category"),
            strength=strength, component=part_index.get(name, -1),
            rank=point_ranks[m].index(1) + 1 if 1 in point_ranks[m] else None,
            ranks=rank_counts[m] if has_graded[m] else [], never_won=never_won))
    if never:
        notes.append(f"Never won a battle: {', '.join(never)}; the strength is finite only through the "
                     f"regularisation (alpha {alpha}).")
    rows_out.sort(key=lambda r: (r.component if r.component >= 0 else len(ordered),
                                 -(r.strength.estimate if r.strength.estimate is not None else -np.inf), r.model))

    # the judge's biases on this run
    swapped = [o.swap_consistent for o in outcomes if o.swap_consistent is not None]
    outright = graded & (score_a != 0.5) & (lengths[:, 0] != lengths[:, 1])
    longer_won = int((outright & ((score_a == 1) == (lengths[:, 0] > lengths[:, 1]))).sum())
    bias = Bias(swap_graded=len(swapped), swap_consistent=sum(swapped),
                position_consistency=sum(swapped) / len(swapped) if swapped else None,
                length_coefficient=fit.coefficient if fit is not None else Interval(
                    estimate=None, reason="no graded battle against the baseline"),
                length_scale=fit.scale if fit is not None else None,
                length_decided=int(outright.sum()), longer_won=longer_won,
                longer_won_share=longer_won / int(outright.sum()) if outright.any() else None)
    return Board(baseline=baseline, models=rows_out, battles=len(outcomes), errors=int((~graded).sum()),
                 clusters=n_clusters, replicates=replicates, seed=seed, level=level, alpha=alpha,
                 components=ordered, notes=notes, bias=bias)
