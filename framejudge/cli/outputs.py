"""The files and folders commands write: checked before any work starts (so a bad path costs
nothing), written after it, and the writes that failed reported together at the end."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from .console import err, fail, flagged


def check_outputs(outputs: dict[str, Optional[Path]], inputs: list[Optional[Path]]) -> None:
    """Each output path (what it holds -> path) writable, none an input or another output."""
    from ..files import OutputError, check_output

    given = [(what, path) for what, path in outputs.items() if path is not None]
    for i, (what, path) in enumerate(given):
        for other_what, other in given[:i]:
            if path.absolute() == other.absolute():
                raise OutputError(f"{path}: given for both the {other_what} and the {what}")
        check_output(path, what, inputs=inputs)


def write_output(path: Path, what: str, text: str) -> Optional[str]:
    """Write one output file; the problem, if it could not be written, for report_problems."""
    from ..files import write_problem

    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return write_problem(path, what, exc)
    return None


def report_problems(problems: Sequence[Optional[str]]) -> None:
    """The outputs that could not be written, each an error line; exit 2 if there are any."""
    found = [p for p in problems if p]
    for p in found[:-1]:
        err.print(flagged("error:", "bold red", p), highlight=False, soft_wrap=True)
    if found:
        fail(found[-1])


def check_cache_folder(off: str = "") -> None:
    """The caches' folder (FRAMEJUDGE_CACHE_DIR, else the user cache folder) can be written: checked
    before any work, where a cache is used, instead of failing at the first frame or verdict."""
    from ..files import OutputError, check_output_folder
    from ..frame_sampler.cache import default_cache_dir

    try:
        check_output_folder(default_cache_dir().parent, "cache")
    except OutputError as exc:
        where = "FRAMEJUDGE_CACHE_DIR" if os.environ.get("FRAMEJUDGE_CACHE_DIR") else "the user cache folder"
        fail(f"{exc} ({where}); set FRAMEJUDGE_CACHE_DIR to a folder that can be written" + (f", or {off}" if off else ""))


def check_image_name(path: Path) -> None:
    """An image file name whose extension names a format that can be written (.png, .jpg, ...)."""
    from PIL import Image

    from ..files import OutputError

    Image.init()
    formats = Image.registered_extensions()
    if formats.get(path.suffix.lower()) not in Image.SAVE:
        given = f" (not {path.suffix!r})" if path.suffix else ""
        raise OutputError(f"{path}: an image file name ends in .jpg, .png or .webp{given}")


def exit_for_errors(errors: dict[str, int], examples: dict[str, str],
                    kept: str = "judge error records in the verdicts file; a rerun grades them again") -> None:
    """After a run's summary: where some turns could not be graded, each kind of error on stderr (how many,
    and its first message) and exit 1; a run that graded every turn goes on to exit 0. `kept`: where the
    errors are, and what becomes of them."""
    import typer

    if not errors:
        return
    total = sum(errors.values())
    err.print(flagged("error:", "bold red", f"{total} turn(s) could not be graded ({kept})"),
              highlight=False, soft_wrap=True)
    for kind, count in sorted(errors.items(), key=lambda kv: -kv[1]):
        err.print(f"  {kind}: {count} turn(s), the first: {examples.get(kind, '')}", highlight=False, soft_wrap=True,
                  markup=False)
    raise typer.Exit(1)


def warn_unknown_usage(unknown: int) -> None:
    """After a run's summary: the records whose token counts the model server misreported, whose
    tokens and cost are unknown and in none of the summary's figures."""
    if unknown:
        err.print(flagged("warning:", "yellow", f"{unknown} record(s) with token usage the model server misreported "
                                                "(not whole numbers of tokens): their tokens and cost are unknown and "
                                                "left out of prompt_tokens, completion_tokens and cost_usd (the "
                                                "verdicts' notes say what was sent)"),
                  highlight=False, soft_wrap=True)
