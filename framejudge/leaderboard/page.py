"""The leaderboard as one self-contained HTML page, in the calibration report's look: a forest plot
of strengths, win-rate bars (raw and length-controlled), a heatmap per slice key, the table and
the judge's biases as a footnote. Plots are PNGs in data URLs; no scripts, no external files."""

from __future__ import annotations

import html
import math

from ..calibration.report import _png, page_head
from .board import Board, Interval, ModelRow, Tie, default_ties

e = html.escape


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _iv(iv: Interval | None, pct: bool = False) -> str:
    if iv is None:
        return "&ndash;"
    if iv.estimate is None:
        return f"undefined ({e(iv.reason or '')})"

    def f(x: float) -> str:
        return f"{100 * x:.1f}%" if pct else f"{x:+.2f}"

    if iv.low is None or iv.high is None:
        return f(iv.estimate)
    return f"{f(iv.estimate)} [{f(iv.low)}, {f(iv.high)}]"


def _xerr(iv: Interval) -> list[list[float]] | None:
    """The interval as matplotlib's error bar about the estimate (None: it has none)."""
    if iv.estimate is None or iv.low is None or iv.high is None:
        return None
    return [[iv.estimate - iv.low], [iv.high - iv.estimate]]


def strength_plot(board: Board) -> str:
    """Bradley-Terry strengths with their bootstrap intervals, one colour per part of the graph;
    a model that never won is drawn at the left edge (its strength is the regularisation's)."""
    plt = _plt()
    rows = [r for r in board.models if r.strength.estimate is not None]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * max(1, len(rows)) + 1.3))
    finite = [r.strength for r in rows if not r.never_won]
    left = min([s.low if s.low is not None else s.estimate for s in finite if s.estimate is not None] or [0]) - 0.5
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for y, r in enumerate(rows):
        colour = colours[r.component % len(colours)]
        if r.never_won:
            ax.plot([left], [y], marker="<", color=colour, markersize=9)
            ax.text(left + 0.05, y, " never won", va="center", fontsize=8, color=colour)
            continue
        s = r.strength
        ax.errorbar([s.estimate], [y], xerr=_xerr(s), fmt="o", capsize=3, color=colour,
                    label=f"part {r.component + 1}" if len(board.components) > 1 else None)
    ax.set_yticks(range(len(rows)), [r.model for r in rows])
    ax.invert_yaxis()
    ax.axvline(0, color="#999999", linewidth=0.8)
    ax.set_xlabel(f"Bradley-Terry strength, logit scale ({100 * board.level:.0f}% bootstrap interval)")
    if len(board.components) > 1:
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="lower right")
    return _png(fig)


def win_rate_plot(board: Board) -> str:
    """Win rate against the baseline per model, raw and length-controlled, with intervals."""
    plt = _plt()
    import numpy as np

    rows = [r for r in board.models if r.vs_baseline is not None and r.vs_baseline.win_rate.estimate is not None]
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * max(1, len(rows)) + 1.3))
    y = np.arange(len(rows))
    for offset, attr, colour, name in ((-0.18, "win_rate", "#4c72b0", "raw"),
                                       (0.18, "length_controlled", "#dd8452", "length-controlled")):
        labelled = False
        for i, r in enumerate(rows):
            iv: Interval = getattr(r.vs_baseline, attr)
            if iv.estimate is None:
                continue
            ax.barh(y[i] + offset, iv.estimate, height=0.34, color=colour, xerr=_xerr(iv), capsize=3,
                    label=None if labelled else name)
            labelled = True
    ax.set_yticks(y, [r.model for r in rows])
    ax.axvline(0.5, color="black", linewidth=0.8)
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"win rate against {board.baseline or 'the baseline'}, ties as half")
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def slice_heatmap(board: Board, key: str) -> str:
    """Win rate against the baseline per model (rows) and value of `key` (columns)."""
    plt = _plt()
    import numpy as np

    groups = board.slices[key]
    values = list(groups)
    models = [r.model for r in board.models if r.vs_baseline is not None]
    grid = np.full((len(models), len(values)), np.nan)
    counts = np.zeros_like(grid, dtype=int)
    for j, value in enumerate(values):
        for r in groups[value].models:
            if r.model in models and r.vs_baseline is not None and r.vs_baseline.win_rate.estimate is not None:
                i = models.index(r.model)
                grid[i, j] = r.vs_baseline.win_rate.estimate
                counts[i, j] = r.vs_baseline.battles - r.vs_baseline.errors
    fig, ax = plt.subplots(figsize=(1.1 * len(values) + 3, 0.5 * len(models) + 1.6))
    cmap = plt.get_cmap("RdBu").with_extremes(bad="#eeeeee")
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(values)), values, rotation=35, ha="right")
    ax.set_yticks(range(len(models)), models)
    for i in range(len(models)):
        for j in range(len(values)):
            text = "–" if math.isnan(grid[i, j]) else f"{grid[i, j]:.2f}\n({counts[i, j]})"
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="white" if not math.isnan(grid[i, j]) and abs(grid[i, j] - 0.5) > 0.3 else "black")
    fig.colorbar(im, ax=ax, label=f"win rate against {board.baseline or 'the baseline'}")
    ax.set_title(f"by {key} (graded battles in brackets)", fontsize=9)
    return _png(fig)


def _ranks(r: ModelRow) -> str:
    total = sum(r.ranks)
    if not total:
        return "&ndash;"
    return ", ".join(f"{k + 1}: {100 * n / total:.0f}%" for k, n in enumerate(r.ranks) if n)


def _tie(board: Board, choice: str) -> Tie:
    return board.ties.get(choice) or default_ties()[choice]


def _tie_heads(board: Board) -> str:
    """The tie columns' heads, in the rubric's words ("ties: both good"), what they count on hover."""
    return "".join(f'<th title="{e(f"{c}: {_tie(board, c).text}")}">ties: {e(_tie(board, c).label)}</th>'
                   for c in ("Both", "Neither"))


def _table(board: Board, table_id: str) -> str:
    parts = [f"<table id={table_id}><thead><tr><th>model</th><th>part</th><th>battles</th><th>turns</th>"
             f"<th>wins</th>{_tie_heads(board)}<th>losses</th><th>errors</th>"
             "<th>win rate</th><th>length-controlled</th><th>Successful</th><th>strength</th><th>rank</th>"
             "<th>rank in replicates</th></tr></thead><tbody>"]
    for r in board.models:
        v = r.vs_baseline
        counts = ("<td colspan=5>baseline</td>" if v is None else
                  "".join(f"<td class=num>{x}</td>" for x in (v.wins, v.both, v.neither, v.losses, v.errors)))
        parts.append(
            f"<tr><td>{e(r.model)}</td><td class=num>{'' if r.component < 0 else r.component + 1}</td>"
            f"<td class=num>{r.battles}</td><td class=num>{r.turns}</td>{counts}"
            f"<td>{'&ndash;' if v is None else _iv(v.win_rate, True)}</td>"
            f"<td>{'&ndash;' if v is None else _iv(v.length_controlled, True)}</td>"
            f"<td>{_iv(r.successful, True)}</td><td>{_iv(r.strength)}</td>"
            f"<td class=num>{'&ndash;' if r.rank is None else r.rank}</td><td>{_ranks(r)}</td></tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def _footnote(board: Board) -> str:
    b = board.bias
    lines = []
    if b.position_consistency is None:
        lines.append("Position consistency: no battle was graded in both orders.")
    else:
        lines.append(f"Position consistency: {b.swap_consistent} of {b.swap_graded} battles graded in both orders "
                     f"agreed ({100 * b.position_consistency:.1f}%).")
    c = b.length_coefficient
    if c.estimate is None:
        lines.append(f"Length effect: not measured ({e(c.reason or '')}).")
    else:
        lines.append(f"Length effect: the length regressions' coefficient (the models' inverse-variance weighted "
                     f"mean) is {_iv(c)} per unit of tanh(length difference / {b.length_scale:.0f} characters) "
                     f"(0: no effect).")
    if b.longer_won_share is not None:
        lines.append(f"The longer answer won {b.longer_won} of {b.length_decided} battles won outright between "
                     f"answers of different lengths ({100 * b.longer_won_share:.1f}%).")
    notes = "".join(f"<li>{e(n)}</li>" for n in board.notes)
    return (f"<div id=footnote><h2>The judge's biases on this run</h2><p>{' '.join(lines)}</p>"
            + (f"<ul id=notes>{notes}</ul>" if notes else "") + "</div>")


def _graded_under(board: Board) -> str:
    return f", graded under the rubric {e(board.rubric)}" if board.rubric else ""


def render_board_html(board: Board, title: str = "framejudge leaderboard") -> str:
    """The board as one page."""
    parts = [page_head(title) + f"""<p id="summary">{board.battles} battles ({board.errors} the judge failed on, left out of the rates) between
{len(board.models)} models; baseline {e(board.baseline or 'none')}{_graded_under(board)}. Win rates count ties
(Both: {e(_tie(board, "Both").label)}; Neither: {e(_tie(board, "Neither").label)}) as half a win; intervals are {100 * board.level:.0f}% percentile bootstraps over {board.clusters} videos (items without a
video stand alone), {board.replicates} replicates, seed {board.seed}. Strengths: Bradley-Terry by I-LSR (choix,
alpha {board.alpha}), mean zero inside each part of the comparison graph.
The length-controlled win rate is the rate at zero length difference from a logistic regression on the
length difference (Wald interval clustered by video).</p>
<h2>Strengths</h2>
<img id="strength-plot" alt="Bradley-Terry strengths with intervals" src="{strength_plot(board)}">
<h2>Win rates against the baseline</h2>"""]
    if any(r.vs_baseline is not None and r.vs_baseline.win_rate.estimate is not None for r in board.models):
        parts.append(f'<img id="win-rate-plot" alt="win rates, raw and length-controlled" src="{win_rate_plot(board)}">')
    parts.append(_table(board, "leaderboard"))
    parts.append(_footnote(board))
    for key, groups in board.slices.items():
        parts.append(f"<h2>By {e(key)}</h2>")
        if any(r.vs_baseline is not None for r in board.models):
            parts.append(f'<img class="slice-heatmap" alt="win rates by {e(key)}" src="{slice_heatmap(board, key)}">')
        parts.append(f"<table class=slices data-key=\"{e(key)}\"><thead><tr><th>{e(key)}</th><th>model</th>"
                     "<th>battles</th><th>win rate</th><th>length-controlled</th><th>Successful</th><th>strength</th>"
                     "</tr></thead><tbody>")
        for value, sub in groups.items():
            for r in sub.models:
                v = r.vs_baseline
                parts.append(f"<tr><td>{e(value)}</td><td>{e(r.model)}</td><td class=num>{r.battles}</td>"
                             f"<td>{'&ndash;' if v is None else _iv(v.win_rate, True)}</td>"
                             f"<td>{'&ndash;' if v is None else _iv(v.length_controlled, True)}</td>"
                             f"<td>{_iv(r.successful, True)}</td><td>{_iv(r.strength)}</td></tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    return "\n".join(parts)
