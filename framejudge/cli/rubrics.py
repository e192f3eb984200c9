"""framejudge rubrics: the rubrics available and the text a judge receives."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from .console import fail, out
from .outputs import report_problems

rubrics_app = typer.Typer(help="Grading rubrics: built-in and your own files.", no_args_is_help=True)

RubricDirs = Annotated[
    Optional[list[Path]], typer.Option("--dir", help="also load rubric files (*.yaml) from here")
]


def check_rubric_dirs(dirs: Optional[list[Path]]) -> None:
    for folder in dirs or []:
        if not folder.is_dir():
            fail(f"--dir {folder}: no such folder" if not folder.exists() else f"--dir {folder}: not a folder")


@rubrics_app.command("list")
def rubrics_list(dirs: RubricDirs = None) -> None:
    """List the rubrics available (built in, FRAMEJUDGE_RUBRICS folders, --dir) and the file each
    comes from; files that cannot be used are reported after the list (exit 2)."""
    from ..rubrics import scan_rubrics

    check_rubric_dirs(dirs)
    scan = scan_rubrics(dirs or [])
    table = Table()
    for col in ("id", "kind", "version", "hash", "title", "from"):
        table.add_column(col)
    for r in scan.rubrics.values():
        table.add_row(r.id, r.kind, r.version, r.content_hash, r.title, scan.sources[r.id])
    out.print(table)
    report_problems(scan.problems)


@rubrics_app.command("show")
def rubrics_show(
    ref: Annotated[str, typer.Argument(help="rubric id, or a path to a rubric file")],
    dirs: RubricDirs = None,
    as_json: Annotated[bool, typer.Option("--json", help="the validated data as JSON")] = False,
) -> None:
    """Print a rubric as the text a judge receives (or as JSON)."""
    from ..rubrics import get_rubric
    from ..rubrics.prompt import rubric_text

    check_rubric_dirs(dirs)
    rubric = get_rubric(ref, dirs or [])
    if as_json:
        out.print_json(rubric.model_dump_json())
    else:
        print(rubric_text(rubric))
