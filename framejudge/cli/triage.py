"""framejudge triage: per field, the judge confidence above which its labels agree with the human
majority at a guaranteed level; and reading a thresholds file back for `grade --triage`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from .calibrate import check_calibration_inputs
from .console import err, fail, flagged, out
from .outputs import check_outputs, report_problems, write_output


def percent(x: Optional[float]) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def triage(
    human: Annotated[Path, typer.Option("--human", help="human labels, JSONL or CSV")],
    judge_path: Annotated[Path, typer.Option("--judge", help="verdicts JSONL (with confidence) from framejudge grade")],
    out_path: Annotated[Path, typer.Option("--out", help="write the thresholds file (JSON) here")],
    target: Annotated[float, typer.Option(help="agreement with the human majority to guarantee, in (0, 1)")] = 0.90,
    delta: Annotated[float, typer.Option(help="the guarantee may fail with probability at most this, in (0, 1)")] = 0.10,
    field: Annotated[Optional[list[str]], typer.Option(
        "--field", help="label field to threshold (repeatable; default: every field the humans rated)")] = None,
    split: Annotated[float, typer.Option(help="share of the labelled items used to choose the thresholds; the rest "
                                              "checks them (1: all, no check)")] = 0.5,
    seed: Annotated[int, typer.Option(help="seed of the split into calibration and test items", min=0,
                                      max=2**32 - 1)] = 0,
    min_units: Annotated[int, typer.Option(help="test a threshold only with at least this many calibration units "
                                                "at or above it", min=1)] = 30,
    report: Annotated[Optional[Path], typer.Option(help="write a self-contained HTML report (coverage against "
                                                        "agreement, reliability) here")] = None,
) -> None:
    """Choose per field the confidence threshold that guarantees --target agreement with the human
    majority with probability 1 - --delta (fixed-sequence testing), on a calibration part of the
    labelled items; report coverage and agreement on the rest."""
    from ..calibration.inputs import LabelsError, human_rows, judge_rows, load_human_labels, video_qa_fields
    from ..calibration.triage import calibrate_triage, no_threshold_reason
    from ..records import read_records

    # checked here, not by Typer's FloatRange: NaN passes its bounds
    for name, value in (("--target", target), ("--delta", delta)):
        if not 0 < value < 1:
            raise LabelsError(f"{name} {value}: give a number between 0 and 1 (not either)")
    if not 0 < split <= 1:
        raise LabelsError(f"--split {split}: give the calibration part's share, more than 0 and at most 1")
    check_outputs({"thresholds": out_path, "report": report}, inputs=[human, judge_path])
    labels = load_human_labels(human)
    if not judge_path.is_file():
        raise LabelsError(f"{judge_path}: " + ("not a regular file" if judge_path.exists() else "no such verdicts file"))
    records = read_records(judge_path)
    rows_h = human_rows(labels)
    rows_j, _ = judge_rows(records)
    if not rows_j:
        fail(f"{judge_path}: no verdicts (only judge errors, or nothing)")
    check_calibration_inputs(rows_h, rows_j, records, video_qa_fields(), [], judge_path)
    try:
        result = calibrate_triage(rows_h, records, target, delta, field, split, seed, min_units)
    except ValueError as exc:
        fail(str(exc))
    thresholds = result.thresholds
    if not any(r.informative for r in result.reliability):
        err.print(flagged("warning:", "yellow", f"no verdict in {judge_path} has an informative confidence: no field "
                          "gets a threshold, every verdict goes to review"), highlight=False, soft_wrap=True)
    problems = [write_output(out_path, "thresholds", thresholds.model_dump_json(indent=1) + "\n")]
    if report is not None:
        from ..calibration.report import render_triage_html

        problems.append(write_output(report, "report", render_triage_html(
            result, title=f"framejudge selective judging: {judge_path.name}")))
    table = Table(title=f"{thresholds.target:.0%} agreement with the human majority, guaranteed with probability "
                        f"{1 - thresholds.delta:.0%} ({thresholds.judge_backend} {thresholds.model_id})")
    for col in ("field", "threshold", "guaranteed", "coverage cal / test", "agreement above / below (test)",
                "humans"):
        table.add_column(col, overflow="fold")
    for name, f in thresholds.fields.items():
        test = f.test
        table.add_row(name, "none" if f.threshold is None else f"{f.threshold:.3f}",
                      "none" if f.guaranteed is None else f"{f.guaranteed:.0%}",
                      f"{percent(f.calibration.coverage)} / {'–' if test is None else percent(test.coverage)}",
                      "–" if test is None else f"{percent(test.agreement_above)} / {percent(test.agreement_below)}",
                      percent(f.human_agreement))
    out.print(table)
    for name, f in thresholds.fields.items():
        reason = no_threshold_reason(f, thresholds)
        if reason is not None:
            out.print(f"{name}: no threshold: {reason}; every verdict goes to review for it", highlight=False,
                      soft_wrap=True)
    out.print(f"thresholds written to {out_path}", highlight=False, soft_wrap=True)
    report_problems(problems)


def load_thresholds(path: Path) -> Any:
    """A thresholds file, or `default`: the reference judge's packaged thresholds; a file that is
    not one is an error line and exit 2 (a file named `default` is given as ./default)."""
    from pydantic import ValidationError

    from ..files import NotJSON, first_problem, strict_json
    from ..judge.rule_confidence import THRESHOLDS_FILE, shipped_thresholds
    from ..schema import Thresholds

    if str(path) == "default":
        found = shipped_thresholds()
        if found is None:
            fail(f"--triage default: this installation has no default thresholds ({THRESHOLDS_FILE} is absent)")
        return found
    if not path.is_file():
        fail(f"--triage {path}: " + ("not a regular file" if path.exists() else "no such thresholds file"))
    try:
        data = strict_json(path.read_text(encoding="utf-8"))
        return Thresholds.model_validate(data)
    except UnicodeDecodeError as exc:
        fail(f"--triage {path}: not JSON ({exc})")
    except NotJSON as exc:  # a key given twice, NaN: as for every other file the CLI reads
        fail(f"--triage {path}: {exc}")
    except ValidationError as exc:
        fail(f"--triage {path}: not a thresholds file from framejudge triage ({first_problem(exc)})")
