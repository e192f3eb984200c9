"""`python -m framejudge`: the framejudge command, as `python -m framejudge.cli` and the installed script run it."""

from .cli import main

main()
