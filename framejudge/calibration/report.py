"""A self-contained HTML report of an audit: tables and plots, no external files or scripts."""

from __future__ import annotations

import base64
import html
import io
from typing import Any

from typing import TYPE_CHECKING

from .audit import AuditResult, FieldAudit, RunComparison
from .bootstrap import Interval
from .reliability import FieldReliability

if TYPE_CHECKING:
    from .triage import FieldCurve, TriageResult


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


PAGE_STYLE = """body{font-family:system-ui,sans-serif;margin:2rem;max-width:72rem;color:#222}
table{border-collapse:collapse;margin:1rem 0;font-size:0.9rem}
th,td{border:1px solid #ccc;padding:0.3rem 0.6rem;text-align:left}
th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%} .grid{display:flex;flex-wrap:wrap;gap:1rem}"""


def page_head(title: str) -> str:
    """The start of a self-contained page (the report's look), up to and with its heading."""
    t = html.escape(title)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{t}</title>\n'
            f"<style>\n{PAGE_STYLE}\n</style></head><body>\n<h1>{t}</h1>\n")


def _fmt(iv: Interval) -> str:
    if iv.estimate is None:
        return f"undefined ({html.escape(iv.undefined or '')})"
    if iv.low is None:
        return f"{iv.estimate:.3f}"
    return f"{iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def _num(x: float | None) -> str:
    return "&ndash;" if x is None else f"{x:.3f}"


def ceiling_plot(result: AuditResult) -> str:
    """Judge vs human majority beside the human ceiling, per field, with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fields = [f for f in result.fields if f.units]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(fields) + 1.2))
    y = np.arange(len(fields))
    for offset, attr, colour, name in ((-0.18, "human_alpha", "#4c72b0", "humans (ceiling)"),
                                       (0.18, "judge_alpha", "#dd8452", "judge vs majority")):
        for i, f in enumerate(fields):
            iv: Interval = getattr(f, attr)
            if iv.estimate is None:
                continue
            err = None
            if iv.low is not None and iv.high is not None:
                err = [[iv.estimate - iv.low], [iv.high - iv.estimate]]
            ax.barh(y[i] + offset, iv.estimate, height=0.34, color=colour, xerr=err, capsize=3,
                    label=name if i == 0 else None)
    ax.set_yticks(y, [f.field for f in fields])
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("Krippendorff's alpha (95% bootstrap interval)")
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def confusion_plot(f: FieldAudit) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    m = np.array(f.confusion)
    fig, ax = plt.subplots(figsize=(1.1 * len(f.categories) + 2, 1.0 * len(f.categories) + 1.5))
    ax.imshow(m, cmap="Blues")
    labels = [str(c) for c in f.categories]
    ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("judge")
    ax.set_ylabel("human majority")
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            ax.text(j, i, str(m[i, j]), ha="center", va="center", color="white" if m[i, j] > m.max() / 2 else "black")
    ax.set_title(f.field)
    return _png(fig)


def slice_plot(key: str, groups: dict[str, AuditResult], field: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, est, lo, hi = [], [], [], []
    for value, sub in groups.items():
        f = next((x for x in sub.fields if x.field == field), None)
        if f is None or f.judge_alpha.estimate is None:
            continue
        names.append(value)
        est.append(f.judge_alpha.estimate)
        lo.append(f.judge_alpha.estimate - (f.judge_alpha.low if f.judge_alpha.low is not None else f.judge_alpha.estimate))
        hi.append((f.judge_alpha.high if f.judge_alpha.high is not None else f.judge_alpha.estimate) - f.judge_alpha.estimate)
    fig, ax = plt.subplots(figsize=(7, 0.4 * max(1, len(names)) + 1.2))
    if names:
        ax.errorbar(est, range(len(names)), xerr=[lo, hi], fmt="o", capsize=3)
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
    ax.set_xlabel(f"judge alpha vs majority, {field}")
    ax.set_title(f"by {key}")
    return _png(fig)


def reliability_plot(r: FieldReliability) -> str:
    """The reliability diagram: accuracy against mean confidence per bin, beside the diagonal of
    a judge whose confidence is its hit rate, with the bins' unit counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.2, 4.0))
    ax.plot([0, 1], [0, 1], color="#999999", linestyle="--", linewidth=1, label="calibrated")
    # the bins with units, each with its mean confidence and accuracy
    full = [((b.low + b.high) / 2, b.mean_confidence, b.accuracy, b.count) for b in r.bins
            if b.count and b.mean_confidence is not None and b.accuracy is not None]
    ax.bar([mid for mid, _, _, _ in full], [acc for _, _, acc, _ in full], width=0.09, color="#4c72b0",
           alpha=0.8, label="accuracy per bin")
    ax.plot([conf for _, conf, _, _ in full], [acc for _, _, acc, _ in full], "o", color="#dd8452",
            label="mean confidence")
    for mid, _, acc, count in full:
        ax.text(mid, acc + 0.02, str(count), ha="center", fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.08)
    ax.set_xlabel("judge confidence")
    ax.set_ylabel("agreement with the human majority")
    ece = "" if r.ece is None else f" (ECE {r.ece:.3f}, Brier {r.brier:.3f})"
    ax.set_title(f"{r.field}{ece}", fontsize=9)
    ax.legend(loc="upper left", fontsize=7)
    return _png(fig)


def reliability_section(rows: list[FieldReliability]) -> str:
    e = html.escape
    parts = ["<h2>Confidence against agreement (reliability)</h2><p>A unit's label is right when it is the "
             "human majority's; units where the humans tie, and units without an informative confidence, are "
             "left out. 10 equal-width bins of confidence.</p><table id=reliability><thead><tr><th>field</th>"
             "<th>units</th><th>ECE</th><th>Brier</th><th>left out: ties</th><th>left out: no confidence</th>"
             "</tr></thead><tbody>"]
    for r in rows:
        shown = ("<td colspan=2>not informative</td>" if not r.informative else
                 f"<td class=num>{_num(r.ece)}</td><td class=num>{_num(r.brier)}</td>")
        parts.append(f"<tr><td>{e(r.field)}</td><td class=num>{r.units}</td>{shown}<td class=num>{r.no_majority}"
                     f"</td><td class=num>{r.no_confidence}</td></tr>")
    parts.append("</tbody></table><div class=grid>")
    for r in rows:
        if r.informative and r.units:
            parts.append(f'<img class="reliability-plot" alt="reliability diagram {e(r.field)}" '
                         f'src="{reliability_plot(r)}">')
    parts.append("</div>")
    return "\n".join(parts)


def coverage_plot(c: FieldCurve, result: TriageResult) -> str:
    """Agreement above each threshold against the coverage it leaves, on the calibration and test
    parts, with the chosen threshold's points, the target line and the human-human ceiling."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = result.thresholds
    f = t.fields[c.field]
    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    for points, style, name in ((c.calibration, "-", "calibration part"), (c.test, "--", "test part")):
        shown = [(p.coverage, p.agreement) for p in points if p.agreement is not None]
        if shown:
            ax.plot([cov for cov, _ in shown], [agr for _, agr in shown], style, marker=".", label=name)
    ax.axhline(t.target, color="#c44e52", linewidth=1, label=f"target {t.target:.0%}")
    if f.human_agreement is not None:
        ax.axhline(f.human_agreement, color="#55a868", linewidth=1, linestyle=":",
                   label=f"human-human {f.human_agreement:.0%}")
    for part, colour, name in ((f.calibration, "#4c72b0", "chosen (calibration)"), (f.test, "#dd8452", "chosen (test)")):
        if f.threshold is not None and part is not None and part.agreement_above is not None:
            ax.plot([part.coverage], [part.agreement_above], "*", markersize=14, color=colour, label=name)
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("coverage (share graded automatically)")
    ax.set_ylabel("agreement with the human majority above the threshold")
    chosen = "no threshold" if f.threshold is None else f"threshold {f.threshold:.3f}"
    ax.set_title(f"{c.field}: {chosen}", fontsize=9)
    ax.legend(loc="lower left", fontsize=7)
    return _png(fig)


def render_triage_html(result: TriageResult, title: str = "framejudge selective judging") -> str:
    """The thresholds of `framejudge triage`, their coverage-vs-agreement curves and the judge's
    reliability, as one self-contained page."""
    e = html.escape
    t = result.thresholds

    def pct(x: float | None) -> str:
        return "&ndash;" if x is None else f"{100 * x:.1f}%"

    parts = [page_head(title) + f"""<p id="summary">Judge {e(t.judge_backend)} {e(t.model_id)}, rubric {e(t.rubric_id)} ({e(t.rubric_hash[:12])}).
Target: {t.target:.0%} agreement with the human majority above each field's threshold, with probability at least
{1 - t.delta:.0%} (fixed-sequence testing with exact binomial bounds, as in Trust or Escalate, Jung et al., ICLR 2025).
Items split by seed {t.seed}: {t.split:.0%} to choose the thresholds, the rest to check them.</p>
<h2>Thresholds</h2><table id=thresholds><thead><tr><th>field</th><th>threshold</th><th>guaranteed</th>
<th>coverage (calibration)</th><th>coverage (test)</th><th>agreement above (test)</th><th>agreement below (test)</th>
<th>human-human</th></tr></thead><tbody>"""]
    for name, f in t.fields.items():
        test = f.test
        parts.append(f"<tr><td>{e(name)}</td><td class=num>{'none' if f.threshold is None else f'{f.threshold:.3f}'}</td>"
                     f"<td class=num>{pct(f.guaranteed)}</td><td class=num>{pct(f.calibration.coverage)}</td>"
                     f"<td class=num>{pct(test.coverage if test else None)}</td>"
                     f"<td class=num>{pct(test.agreement_above if test else None)}</td>"
                     f"<td class=num>{pct(test.agreement_below if test else None)}</td>"
                     f"<td class=num>{pct(f.human_agreement)}</td></tr>")
    parts.append("</tbody></table>")
    from .triage import no_threshold_reason

    for name, f in t.fields.items():
        reason = no_threshold_reason(f, t)
        if reason is not None:
            parts.append(f'<p class="no-threshold">{e(name)}: no threshold: {e(reason)}; every verdict goes to '
                         "review for it.</p>")
    parts.append("<h2>Coverage against agreement</h2><div class=grid>")
    for c in result.curves:
        parts.append(f'<img class="coverage-plot" alt="coverage against agreement {e(c.field)}" '
                     f'src="{coverage_plot(c, result)}">')
    parts.append("</div>")
    if result.reliability:
        parts.append(reliability_section(result.reliability))
    parts.append("</body></html>")
    return "\n".join(parts)


def render_html(result: AuditResult, comparison: list[RunComparison] | None = None, title: str = "framejudge calibration") -> str:
    e = html.escape
    parts = [page_head(title) + f"""<p id="summary">{len(result.annotators)} annotators; judge errors left out: {result.judge_errors};
units without a verdict: {result.judge_units_missing}; bootstrap: {result.replicates} replicates over items, seed {result.seed}.
{"" if result.swap_consistency is None else f"Swap consistency of the judge: {result.swap_consistency:.3f}."}</p>
<h2>Judge vs the human ceiling</h2>
<img id="ceiling-plot" alt="judge alpha beside human alpha per field" src="{ceiling_plot(result)}">
<table id="agreement"><thead><tr><th>field</th><th>units</th><th>human alpha (ceiling)</th><th>judge alpha vs majority</th>
<th>humans + judge alpha</th><th>human Fleiss</th><th>human AC1</th><th>judge kappa</th><th>judge AC1</th><th>judge PABAK</th><th>ties (no gold)</th></tr></thead><tbody>"""]
    for f in result.fields:
        parts.append(
            f"<tr><td>{e(f.field)}</td><td class=num>{f.units}</td><td>{_fmt(f.human_alpha)}</td><td>{_fmt(f.judge_alpha)}</td>"
            f"<td>{_fmt(f.judge_vs_humans_alpha)}</td><td class=num>{_num(f.human_fleiss.value)}</td>"
            f"<td class=num>{_num(f.human_ac1.value)}</td><td class=num>{_num(f.judge_kappa.value)}</td>"
            f"<td class=num>{_num(f.judge_ac1.value)}</td><td class=num>{_num(f.judge_pabak.value)}</td>"
            f"<td class=num>{f.majority_ties}</td></tr>")
    parts.append("</tbody></table><h2>Per category</h2><div class=grid>")
    for f in result.fields:
        if sum(map(sum, f.confusion)) == 0:
            continue
        parts.append(f'<div><img class="confusion-plot" alt="confusion matrix {e(f.field)}" src="{confusion_plot(f)}">'
                     f'<table class="per-class"><thead><tr><th>{e(f.field)}</th><th>precision</th><th>recall</th><th>F1</th><th>support</th></tr></thead><tbody>')
        for c in f.per_class:
            parts.append(f"<tr><td>{e(str(c.label))}</td><td class=num>{_num(c.precision)}</td><td class=num>{_num(c.recall)}</td>"
                         f"<td class=num>{_num(c.f1)}</td><td class=num>{c.support}</td></tr>")
        parts.append("</tbody></table></div>")
    parts.append("</div><h2>Judge vs each annotator</h2><table id=each><thead><tr><th>field</th><th>annotator</th><th>units</th><th>kappa</th><th>alpha</th></tr></thead><tbody>")
    for f in result.fields:
        for p in f.judge_vs_each:
            if p.units:
                parts.append(f"<tr><td>{e(f.field)}</td><td>{e(p.annotator)}</td><td class=num>{p.units}</td>"
                             f"<td class=num>{_num(p.kappa.value)}</td><td class=num>{_num(p.alpha.value)}</td></tr>")
    parts.append("</tbody></table>")
    for key, groups in result.slices.items():
        parts.append(f"<h2>By {e(key)}</h2>")
        main_field = next((f.field for f in result.fields if f.units), None)
        if main_field:
            parts.append(f'<img class="slice-plot" alt="agreement by {e(key)}" src="{slice_plot(key, groups, main_field)}">')
        parts.append("<table class=slices><thead><tr><th>slice</th><th>field</th><th>units</th><th>human alpha</th><th>judge alpha vs majority</th></tr></thead><tbody>")
        for value, sub in groups.items():
            for f in sub.fields:
                if f.units:
                    parts.append(f"<tr><td>{e(value)}</td><td>{e(f.field)}</td><td class=num>{f.units}</td>"
                                 f"<td>{_fmt(f.human_alpha)}</td><td>{_fmt(f.judge_alpha)}</td></tr>")
        parts.append("</tbody></table>")
    if comparison:
        parts.append("<h2>Two judge runs</h2><table id=comparison><thead><tr><th>field</th><th>first</th><th>second</th><th>difference [95% CI]</th></tr></thead><tbody>")
        for run in comparison:
            diff = "undefined" if run.difference is None else f"{run.difference:+.3f}" + ("" if run.low is None else f" [{run.low:+.3f}, {run.high:+.3f}]")
            parts.append(f"<tr><td>{e(run.field)}</td><td>{_fmt(run.first)}</td><td>{_fmt(run.second)}</td><td>{diff}</td></tr>")
        parts.append("</tbody></table>")
    if result.gold:
        parts.append("<h2>Against the adjudicated gold: before and after</h2>"
                     "<p>Before: the judge against the human majority. After: against the gold labels, which "
                     "replace the majority where a unit has them. Difference: after minus before, paired "
                     "bootstrap over the same items.</p><table id=gold><thead><tr><th>field</th>"
                     "<th>before: alpha vs majority</th><th>after: alpha vs gold</th><th>difference [95% CI]</th>"
                     "<th>agreement before</th><th>agreement after</th><th>units before</th><th>units after</th>"
                     "<th>units changed</th></tr></thead><tbody>")
        for g in result.gold:
            diff = "undefined" if g.difference is None else f"{g.difference:+.3f}" + ("" if g.low is None else f" [{g.low:+.3f}, {g.high:+.3f}]")
            parts.append(f"<tr><td>{e(g.field)}</td><td>{_fmt(g.before)}</td><td>{_fmt(g.after)}</td><td>{diff}</td>"
                         f"<td class=num>{_num(g.before_percent.value)}</td><td class=num>{_num(g.after_percent.value)}</td>"
                         f"<td class=num>{g.units_before}</td><td class=num>{g.units_after}</td>"
                         f"<td class=num>{g.changed}</td></tr>")
        parts.append("</tbody></table>")
    if result.reliability:
        parts.append(reliability_section(result.reliability))
    parts.append("<h2>Disagreements to review</h2><table id=disagreements><thead><tr><th>item</th><th>turn</th><th>field</th>"
                 "<th>judge</th><th>majority</th><th>humans</th><th>kind</th><th>video</th><th>asked at</th><th>frames the judge saw (s)</th></tr></thead><tbody>")
    for d in result.disagreements[:200]:
        humans = ", ".join(f"{e(k)}: {e(str(v))}" for k, v in d.human_labels.items())
        parts.append(f"<tr><td>{e(d.item_id)}</td><td class=num>{d.turn}</td><td>{e(d.field)}</td><td>{e(str(d.judge))}</td>"
                     f"<td>{e(str(d.majority))}</td><td>{humans}</td><td>{e(d.kind)}</td><td>{e(d.video or '')}</td>"
                     f"<td class=num>{'' if d.turn_time is None else f'{d.turn_time:.2f}'}</td>"
                     f"<td>{e(', '.join(f'{t:.2f}' for t in d.frame_timestamps))}</td></tr>")
    parts.append("</tbody></table></body></html>")
    return "\n".join(parts)
