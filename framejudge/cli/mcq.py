"""framejudge mcq: multiple-choice answers scored against gold letters."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .console import out
from .outputs import check_outputs, report_problems, write_output

mcq_app = typer.Typer(help="Multiple-choice answer scoring.", no_args_is_help=True)


@mcq_app.command("score")
def mcq_score(
    predictions: Annotated[Path, typer.Argument(help="JSONL: one prediction per row")],
    gold: Annotated[Path, typer.Argument(help="JSONL: gold letter and options per row")],
    key: Annotated[str, typer.Option(help="field joining the two files")] = "video_path",
    prediction_field: Annotated[str, typer.Option(help="field holding the reply")] = "mcq_answer",
    gold_field: Annotated[str, typer.Option(help="field holding the gold letter")] = "mcq_answer",
    options_field: Annotated[str, typer.Option(help="field holding the options")] = "mcq_options",
    details: Annotated[Optional[Path], typer.Option(help="write per-row results (JSONL) here")] = None,
) -> None:
    """Accuracy of multiple-choice predictions, with unparseable replies counted apart."""
    from ..rubrics.mcq import score_files

    check_outputs({"details": details}, inputs=[predictions, gold])
    report = score_files(predictions, gold, key, prediction_field, gold_field, options_field)
    out.print_json(report.model_dump_json(exclude={"rows"}))
    if details is not None:
        report_problems([write_output(details, "details", "".join(row.model_dump_json() + "\n"
                                                                    for row in report.rows))])
