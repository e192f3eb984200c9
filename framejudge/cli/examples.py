"""framejudge examples: the bundled example clips."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .console import fail, out

examples_app = typer.Typer(help="The bundled example clips.", no_args_is_help=True)


@examples_app.command("make")
def examples_make(
    directory: Annotated[Path, typer.Argument(help="where to write the clips")] = Path("examples/videos"),
    overwrite: Annotated[bool, typer.Option(help="rewrite clips that already exist")] = False,
) -> None:
    """Generate the bundled example clips (moving shapes, text, a scene cut, a countdown)."""
    from ..examples.clips import make_examples
    from ..files import check_output_folder, write_problem

    try:
        check_output_folder(directory, "examples")
        paths = make_examples(directory, overwrite=overwrite)
    except OSError as exc:
        fail(write_problem(directory, "examples", exc))
    for p in paths:
        out.print(str(p))
