"""What the command line prints and where: results on stdout, notes, warnings and errors on
stderr, each message whole; and the one place where an error a user caused becomes an `error:`
line and exit 2."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, NoReturn, Optional

import typer
from rich.console import Console, ConsoleDimensions
from rich.text import Text
from typer.core import TyperGroup

from ..errors import FramejudgeError

if TYPE_CHECKING:
    from typer import _click  # click's Context, which TyperGroup.invoke takes (typer.Context is a subclass)


class WholeCells(Console):
    """A console that prints every table cell and message line whole when it writes to a pipe or
    a file: Rich would fit them to 80 columns there, cutting cells (`categ…`) and wrapping
    messages mid-word. A terminal's width, or COLUMNS when set, is kept."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self._width is None and not self.is_terminal:
            return ConsoleDimensions(PIPE_WIDTH, size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


PIPE_WIDTH = 100_000  # columns: wider than any table the CLI prints, so none is cut

# no console markup: file names, ids and messages are printed as they are ("clip[1].mp4", "a[/]b")
out = WholeCells(markup=False)
err = WholeCells(stderr=True, markup=False)


def flagged(word: str, style: str, message: str) -> Text:
    """'error: message' with the word styled and the message as it is."""
    return Text.assemble((word, style), " ", message)


def progress_line(state: Any, speed: Optional[float] = None) -> str:
    """A running batch in a few words: items in hand, calls against their limit, pace, errors, speed."""
    parts = [f"{state.in_flight} items in hand"]
    if state.limit is not None:
        parts.append(f"calls {state.calls}/{state.limit}")
    if state.pace is not None:
        parts.append(f"paced {state.pace:.1f}/s")
    parts.append(f"{state.errors} errors")
    if speed:
        parts.append(f"{speed:.1f} turns/s")
    return ", ".join(parts)


def fail(message: str, code: int = 2) -> NoReturn:
    """The message as an `error:` line on stderr; the command ends with exit status `code`."""
    err.print(flagged("error:", "bold red", message), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


class Commands(TyperGroup):
    """framejudge's commands, with the one place where an error a user caused (a bad file, option
    or setting: a FramejudgeError, whichever command or library call raised it) becomes an
    `error: <message>` line on stderr and exit status 2."""

    def invoke(self, ctx: _click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FramejudgeError as exc:
            fail(str(exc))


def plain_warnings() -> None:
    """framejudge's own warnings (a damaged video's, from sampling) as one plain `warning:` line
    each, like the CLI's other notes; Python's own format (file, line, source) stays for others."""
    python_format = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        if category.__module__.startswith("framejudge."):
            err.print(flagged("warning:", "yellow", str(message)), highlight=False, soft_wrap=True)
        else:
            python_format(message, category, filename, lineno, file, line)

    warnings.showwarning = show
