"""framejudge calibrate: the judge's agreement with human labels beside the humans' agreement with
each other, with bootstrap intervals; slices, a second run, adjudicated gold, confidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from .console import err, fail, flagged, out
from .outputs import check_outputs, report_problems, write_output


def calibrate(
    human: Annotated[Path, typer.Option("--human", help="human labels, JSONL or CSV")],
    judge_path: Annotated[Path, typer.Option("--judge", help="verdicts JSONL from framejudge grade")],
    replicates: Annotated[int, typer.Option(help="bootstrap replicates (>= 1000 recommended)", min=1)] = 1000,
    seed: Annotated[int, typer.Option(help="bootstrap seed", min=0, max=2**32 - 1)] = 0,
    out_path: Annotated[Optional[Path], typer.Option("--out", help="write the full result as JSON")] = None,
    disagreements: Annotated[Optional[Path], typer.Option(help="write disagreements to review (JSONL label rows to fill in and feed back with --human)")] = None,
    by: Annotated[Optional[list[str]], typer.Option("--by", help="also audit per value of: turn, or a metadata field")] = None,
    compare: Annotated[Optional[Path], typer.Option(help="a second verdicts file: compare the two runs")] = None,
    report: Annotated[Optional[Path], typer.Option(help="write a self-contained HTML report here")] = None,
    gold: Annotated[Optional[Path], typer.Option(help="adjudicated gold labels (one row per unit, JSONL or CSV): "
                                                      "the judge against them beside the human majority")] = None,
    review_request: Annotated[Optional[Path], typer.Option(
        "--review-request", help="write the labels and verdicts (with --items, the items) as the JSON body of a "
                                 "server's POST /v1/calibrate, to review this calibration in its review queue")] = None,
    items_path: Annotated[Optional[Path], typer.Option(
        "--items", help="with --review-request: the graded items, so the review pages show their questions, "
                        "responses and frames")] = None,
) -> None:
    """Judge vs human agreement beside the human-vs-human ceiling, with bootstrap intervals.

    Exit status: 0 measured (it grades nothing: the judge error records in --judge are left out and
    counted in the table's title); 2 refused (bad input)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ..calibration.audit import compare_runs
    from ..calibration.calibrate import calibration
    from ..calibration.inputs import (LabelsError, gold_rows, human_rows, judge_rows, load_gold_labels,
                                     load_human_labels, video_qa_fields)
    from ..records import read_records

    check_outputs({"result": out_path, "report": report, "disagreements": disagreements, "review request": review_request},
                  inputs=[human, judge_path, compare, gold, items_path])
    if items_path is not None and review_request is None:
        fail("--items: the items are read only for --review-request (the review pages show them)")
    labels = load_human_labels(human)
    items = None
    if items_path is not None:
        from ..judge import load_items

        items = load_items(items_path)
    golden = load_gold_labels(gold, {(h.item_id, h.turn) for h in labels}) if gold is not None else None
    for verdicts in (judge_path, compare):
        if verdicts is not None and not verdicts.is_file():
            raise LabelsError(f"{verdicts}: " + ("not a regular file" if verdicts.exists() else "no such verdicts file"))
    records = read_records(judge_path)
    second = read_records(compare) if compare is not None else None
    rows_j, _ = judge_rows(records)
    fields = video_qa_fields()
    rows_h = human_rows(labels)
    check_calibration_inputs(rows_h, rows_j, records, fields, by or [], judge_path)
    with Progress(TextColumn("bootstrap {task.fields[field]}"), BarColumn(), MofNCompleteColumn(), console=err,
                  transient=True) as progress:
        task = progress.add_task("b", total=replicates * 3 * len(fields) * (2 if golden else 1), field="")

        def tick(field: str, b: int) -> None:
            progress.update(task, advance=1, field=field)

        result = calibration(rows_h, records, replicates=replicates, seed=seed, where=str(judge_path), fields=fields,
                             gold=gold_rows(golden) if golden is not None else None, by=by or [], progress=tick)
    comparison = compare_runs(rows_h, rows_j, judge_rows(second)[0], fields, replicates, seed) if second is not None else None
    problems = []  # an output that fails does not lose the others, nor the tables below
    if out_path is not None:
        payload = result.model_dump(mode="json")
        if comparison is not None:
            payload["comparison"] = [c.model_dump(mode="json") for c in comparison]
        problems.append(write_output(out_path, "result", json.dumps(payload, indent=1)))
    if report is not None:
        from ..calibration.report import render_html

        problems.append(write_output(report, "report", render_html(
            result, comparison, title=f"framejudge calibration: {judge_path.name}")))
    if review_request is not None:
        problems.append(write_output(review_request, "review request", review_body(
            labels, records, items, replicates, seed)))
    if disagreements is not None:
        from ..calibration.inputs import relabel_rows

        problems.append(write_output(disagreements, "disagreements", "".join(
            row.model_dump_json(exclude_none=True) + "\n" for row in relabel_rows(result.disagreements))))

    def fmt(iv) -> str:
        if iv.estimate is None:
            return f"undefined ({iv.undefined})"
        if iv.low is None:
            return f"{iv.estimate:.3f}"
        return f"{iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]"

    table = Table(title=f"judge vs humans ({len(result.annotators)} annotators; {result.judge_errors} judge errors left out)")
    for col in ("field", "units", "human alpha (ceiling)", "judge alpha vs majority", "judge AC1", "ties"):
        table.add_column(col)
    for f in result.fields:
        table.add_row(f.field, str(f.units), fmt(f.human_alpha), fmt(f.judge_alpha),
                      "undefined" if f.judge_ac1.value is None else f"{f.judge_ac1.value:.3f}", str(f.majority_ties))
    out.print(table)
    for key, groups in result.slices.items():
        t = Table(title=f"by {key}")
        for col in ("slice", "field", "units", "human alpha", "judge alpha vs majority"):
            t.add_column(col)
        for value, sub in groups.items():
            for f in sub.fields:
                if f.units:
                    t.add_row(value, f.field, str(f.units), fmt(f.human_alpha), fmt(f.judge_alpha))
        out.print(t)
    if comparison is not None and compare is not None:
        t = Table(title=f"{judge_path.name} vs {compare.name} against the human majority")
        for col in ("field", "first", "second", "difference [95% CI]"):
            t.add_column(col)
        for c in comparison:
            diff = "undefined" if c.difference is None else (
                f"{c.difference:+.3f}" + ("" if c.low is None else f" [{c.low:+.3f}, {c.high:+.3f}]"))
            t.add_row(c.field, fmt(c.first), fmt(c.second), diff)
        out.print(t)
    if result.gold and gold is not None:
        t = Table(title=f"against the adjudicated gold ({gold.name}): before (human majority) and after")
        for col in ("field", "before", "after", "difference [95% CI]", "agreement before", "agreement after",
                    "units before", "units after", "units changed"):
            t.add_column(col)
        for g in result.gold:
            diff = "undefined" if g.difference is None else (
                f"{g.difference:+.3f}" + ("" if g.low is None else f" [{g.low:+.3f}, {g.high:+.3f}]"))
            t.add_row(g.field, fmt(g.before), fmt(g.after), diff, percent(g.before_percent.value),
                      percent(g.after_percent.value), str(g.units_before), str(g.units_after), str(g.changed))
        out.print(t)
    if result.reliability:
        t = Table(title="the judge's confidence against agreement with the majority (10 equal-width bins)")
        for col in ("field", "units", "ECE", "Brier", "left out: ties", "left out: no confidence"):
            t.add_column(col)
        for r in result.reliability:
            shown = ("not informative", "") if not r.informative else (
                "undefined" if r.ece is None else f"{r.ece:.3f}", "undefined" if r.brier is None else f"{r.brier:.3f}")
            t.add_row(r.field, str(r.units), *shown, str(r.no_majority), str(r.no_confidence))
        out.print(t)
    if result.swap_consistency is not None:
        out.print(f"swap consistency of the judge: {result.swap_consistency:.3f}")
    report_problems(problems)


def review_body(labels: list, records: list, items: Optional[list], replicates: int, seed: int) -> str:
    """The body of POST /v1/calibrate for this calibration: the labels and verdicts as read here (the
    server checks them again), the items when given, and the bootstrap's replicates and seed, so the
    server's figures are these."""
    body = {"labels": [h.model_dump(mode="json", exclude_none=True) for h in labels],
            "verdicts": [r.model_dump(mode="json", exclude_none=True) for r in records],
            **({"items": [i.model_dump(mode="json", exclude_none=True) for i in items]} if items is not None else {}),
            "replicates": replicates, "seed": seed}
    return json.dumps(body, ensure_ascii=False) + "\n"


def percent(x: Optional[float]) -> str:
    return "undefined" if x is None else f"{100 * x:.1f}%"


def check_calibration_inputs(rows_h: list, rows_j: list, records: list, fields: list, by: list[str],
                             judge_path: Path) -> None:
    """Refuse a calibration that would measure nothing (no labelled turn has a verdict, a --by key
    nobody has), and warn about labelled turns the judge has no verdict for."""
    from ..calibration.audit import slice_key
    from ..calibration.calibrate import check_judged

    unjudged, labelled = check_judged(rows_h, records, str(judge_path))  # refused where none has a record
    if unjudged:
        examples = ", ".join(f"{i!r} turn {t}" for i, t in unjudged[:3])
        err.print(flagged("warning:", "yellow", f"{len(unjudged)} of {labelled} labelled turn(s) have no verdict "
                          f"in {judge_path} ({examples}{', ...' if len(unjudged) > 3 else ''}); they count toward "
                          "the human ceiling only"), highlight=False, soft_wrap=True)
    names = {f.name for f in fields}
    for key in by:
        if key in names:
            found = any(h.values.get(key) is not None for h in rows_h)
        else:
            found = any(slice_key(r, key) is not None for r in [*rows_h, *rows_j])
        if not found:
            known = sorted({k for r in [*rows_h, *rows_j] for k in r.metadata})
            fail(f"--by {key}: no label or verdict has it (use turn, a label field such as category_a"
                 + (f", or a metadata field: {', '.join(known)})" if known else ")"))
