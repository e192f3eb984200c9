"""The framejudge command line: parse arguments, call the library, print. `app` is the Typer app
(framejudge.cli.app attaches each command module's commands); `main` runs it, for the
`framejudge` console script and `python -m framejudge.cli`."""

from __future__ import annotations

from .app import app, main

__all__ = ["app", "main"]
