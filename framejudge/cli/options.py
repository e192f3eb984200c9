"""Options several commands take, said once (name, help, environment variable), and the checks of
their values that Typer's own types cannot make."""

from __future__ import annotations

import sys
from pathlib import Path
from enum import Enum
from typing import Annotated, Any, Optional

import typer

from .. import backends, config
from ..schema import Strategy
from .console import fail

JudgeSpec = Annotated[str, typer.Option(help=backends.help_text(), envvar=config.name("FRAMEJUDGE_JUDGE"))]
ApiBase = Annotated[Optional[str], typer.Option(help="OpenAI-compatible server for litellm",
                                                envvar=config.name("FRAMEJUDGE_API_BASE"))]
JudgesPath = Annotated[Optional[Path], typer.Option("--judges", help="judges file (YAML), as for grade",
                                                    envvar=config.name("FRAMEJUDGE_JUDGES_FILE"))]
RubricRef = Annotated[str, typer.Option(help="rubric id or file", envvar=config.name("FRAMEJUDGE_RUBRIC"))]
Frames = Annotated[int, typer.Option("-n", "--frames", help="frame budget per turn")]
StrategyOption = Annotated[Strategy, typer.Option(help="how frames are chosen")]
Fps = Annotated[Optional[float], typer.Option(help="frames per second (fps strategy)")]
MediaRoot = Annotated[Optional[Path], typer.Option(
    help="relative video paths are under here (default: the items file's folder)")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="do not use the verdict cache")]
Yes = Annotated[bool, typer.Option("--yes", help="do not ask before spending tokens")]


class LogLevel(str, Enum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


LogLevelOption = Annotated[LogLevel, typer.Option(help="the events logged on standard error: info adds jobs taken up "
                                                       "and finished to warnings (endpoint cuts and pauses, leases "
                                                       "lost) and errors", envvar=config.name("FRAMEJUDGE_LOG_LEVEL"),
                                                  case_sensitive=False)]
LogJson = Annotated[bool, typer.Option("--log-json", help="log JSON lines (one object per event)",
                                       envvar=config.name("FRAMEJUDGE_LOG_JSON"))]


def check_media_root(media_root: Optional[Path]) -> None:
    """--media-root, when given, is a folder (an ItemsError otherwise: the items' videos are under it)."""
    from ..records import ItemsError

    if media_root is not None and not media_root.is_dir():
        raise ItemsError(f"--media-root {media_root}: " + ("not a folder" if media_root.exists() else "no such folder"))


def confirm_spending(judge: Any, yes: bool) -> None:
    """A judge that spends tokens runs with --yes, or after the person at the terminal says so
    (exit 1 if they do not); without a terminal to ask at, --yes is an error."""
    from ..judge.base import spends

    if spends(judge) and not yes:
        if not sys.stdin.isatty():
            fail("this judge spends tokens: pass --yes to run without a prompt")
        if not typer.confirm("Go ahead?"):
            raise typer.Exit(1)
