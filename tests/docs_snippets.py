"""The code blocks of README.md and the pages under docs/, read as a reader meets them.

A fence's language says what a block is: `bash` and `python` blocks are run as written (by
tests/test_docs_snippets.py), `text` blocks are a command's synopsis (its options checked against the
command), `yaml`, `json` and `toml` blocks are data (parsed), anything else is shown output. A comment
on the line before a fence says more of it (invisible on the page and on GitHub):

- `<!-- snippet: file NAME -->`: a data block saved as NAME in the folder the page's blocks run in;
- `<!-- snippet: skip REASON -->`: a block that is not run, and why;
- `<!-- snippet: matches FILE -->`: shown output, whose `"key": value` lines are the values the JSON file
  FILE holds once the page's blocks have run (a number to the digits shown).

README.md's blocks run in a folder with the checkout's `./run` (its `grade` and `framejudge` commands,
the set-up already done).

A comment anywhere on a page, `<!-- snippets: model server at HOST:PORT -->`, says that the page's blocks
speak to a model server at that address: they are run against the stand-in OpenAI-compatible server
(bench/model_server.py), its address put in place of that one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# docs/cli.md is written by the CLI itself (typer utils docs) and checked against it by test_cli_reference.py
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name != "cli.md")]
RUN = ("bash", "python")
DATA = ("yaml", "json", "toml")
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
DIRECTIVE = re.compile(r"<!-- snippet: (file|skip|matches) (.+?) -->\s*$")
SERVER = re.compile(r"<!-- snippets: model server at ([\w.-]+:\d+) -->")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    directive: str | None = None  # "file", "skip" or "matches"
    argument: str = ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = DIRECTIVE.search(before)
        found.append(Block(page, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2),
                           directive.group(1) if directive else None, directive.group(2).strip() if directive else ""))
    return found


def model_server_address(page: Path) -> str | None:
    m = SERVER.search(page.read_text(encoding="utf-8"))
    return m.group(1) if m else None
