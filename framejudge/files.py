"""Reading user files (items, labels, predictions) with errors that name the file and line, and
checking where output files go before any work starts."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from pathlib import Path
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import FramejudgeError

M = TypeVar("M", bound=BaseModel)


def read_text(path: str | os.PathLike[str], what: str, error: type[Exception]) -> str:
    """A UTF-8 text file (with or without the byte-order mark spreadsheet programs write)."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):  # /dev/zero would be read forever
            raise error(f"{p}: is a device, not a file")
        data = p.read_bytes()
    except FileNotFoundError:
        raise error(f"{p}: no such {what} file") from None
    except IsADirectoryError:
        raise error(f"{p}: is a folder, not a file") from None
    except OSError as exc:
        raise error(f"{p}: cannot read ({exc.strerror or exc})") from None
    try:
        return utf8_text(data)
    except UnicodeDecodeError as exc:
        raise error(f"{p}:{text_line(exc.object, exc.start)}: {not_utf8(exc)}") from None


def utf8_text(data: bytes) -> str:
    """UTF-8 without a leading byte-order mark; a UnicodeDecodeError's offsets are after the mark."""
    return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")


def text_line(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def not_utf8(exc: UnicodeDecodeError) -> str:
    data, offset = exc.object, exc.start
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"not UTF-8 text (byte 0x{data[offset]:02x} at column {column}); save the file as UTF-8"


class NotJSON(FramejudgeError, ValueError):
    """Text that strict JSON does not allow; the message says what, but not the file and line."""

    code = "not_json"


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for key, value in pairs:
        if key in row:
            raise NotJSON(f"key {key!r} given twice")
        row[key] = value
    return row


def _no_constant(name: str) -> Any:
    raise NotJSON(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NotJSON(f"number {text[:20]}{'...' if len(text) > 20 else ''} is too large")
    return value


def strict_loads(text: str | bytes) -> Any:
    """json.loads, but a key given twice, NaN, Infinity and numbers too large to hold are NotJSON
    (a syntax error stays a json.JSONDecodeError, with its place)."""
    return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_finite)


def strict_json(text: str | bytes) -> Any:
    """JSON as the standard has it: a key given twice, NaN, Infinity and numbers too large to hold
    are errors (NotJSON), where Python's reader keeps the last key and reads NaN and 1e999 as floats."""
    try:
        return strict_loads(text)
    except json.JSONDecodeError as exc:
        raise NotJSON(f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise NotJSON("nested too deeply to read") from None
    except NotJSON:
        raise
    except ValueError:  # an integer of thousands of digits
        raise NotJSON(f"a number has more than {sys.get_int_max_str_digits()} digits") from None


# CSV cells a spreadsheet would run as a formula start with one of these (OWASP, CSV injection);
# written, such a cell gets a leading apostrophe, and so does one that would read back as such
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: str) -> str:
    """`text` as a CSV cell a spreadsheet shows as text (`=HYPERLINK(...)` becomes `'=HYPERLINK(...)`);
    `cell_text` reads it back unchanged."""
    if text.startswith(FORMULA_STARTS) or (text.startswith("'") and text[1:].startswith((*FORMULA_STARTS, "'"))):
        return "'" + text
    return text


def cell_text(cell: str) -> str:
    """The text `csv_cell` wrote: one leading apostrophe dropped where it guards a formula (or
    another such apostrophe); any other cell as it is."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith((*FORMULA_STARTS, "'")) else cell


def jsonl_objects(path: str | os.PathLike[str], text: str, error: type[ValueError]) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; anything but a JSON object is an error."""
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = strict_json(line)
        except NotJSON as exc:
            raise error(f"{path}:{n}: {exc}") from None
        if not isinstance(row, dict):
            raise error(f"{path}:{n}: each line must be a JSON object")
        rows.append((n, row))
    return rows


def first_problem(exc: ValidationError, default: str = "row", names: Mapping[str, str] | None = None) -> str:
    """'field.path: message' for the first validation error, in plain words. `names`: what to call
    top-level fields instead (a command-line flag for a field: '--flag VALUE: message')."""
    e = exc.errors()[0]
    loc = e["loc"]
    message = e["msg"].removeprefix("Value error, ")
    if names and loc and loc[0] in names:
        return f"{names[str(loc[0])]} {e['input']}: {message}" if len(loc) == 1 else \
            f"{names[str(loc[0])]} {'.'.join(str(x) for x in loc[1:])}: {message}"
    where = ".".join(str(x) for x in loc) or default
    return f"{where}: {message}"


def line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    node = root
    line = root.start_mark.line + 1 if root is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if key.value == part:
                    node = value
                    line = key.start_mark.line + 1
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def repeated_key(root: yaml.Node | None) -> tuple[str, int, int] | None:
    """(key, first line, repeated line) of the first mapping key given twice; YAML loaders keep
    the last silently."""
    stack = [root] if root is not None else []
    seen_nodes: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:  # an alias: the same node again
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            lines: dict[str, int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    line = key.start_mark.line + 1
                    if key.value in lines:
                        return key.value, lines[key.value], line
                    lines[key.value] = line
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return None


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, reading exponents as YAML 1.2 does: `2e6` and `1e-9` are numbers (YAML
    1.1 wants a dot, so they were text)."""


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
                              list("-+0123456789"))


def unreadable_scalar(text: str) -> tuple[int, str]:
    """(line, text) of the first value in a YAML document that cannot be constructed (1, '' if none is found)."""
    constructor = yaml.constructor.SafeConstructor()
    nodes = [yaml.compose(text, Loader=_Loader)]
    while nodes:
        node = nodes.pop(0)
        if isinstance(node, yaml.ScalarNode):
            try:
                constructor.construct_object(node)
            except ValueError:
                return node.start_mark.line + 1, str(node.value)
        elif isinstance(node, yaml.SequenceNode):
            nodes[:0] = node.value
        elif isinstance(node, yaml.MappingNode):
            nodes[:0] = [part for pair in node.value for part in pair]
    return 1, ""


def parse_yaml_model(text: str, source: str, model: type[M], error: type[Exception], what: str,
                     check: Callable[[dict[str, Any], yaml.Node], None] | None = None) -> M:
    """A YAML mapping validated as `model`; every problem as 'source:line: field.path: message'.
    `check(data, root)` may raise first, for a rule that needs the file's lines to say where."""
    try:
        data = yaml.load(text, Loader=_Loader)
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(f"{where}: not valid YAML ({problem})") from None
    except RecursionError:
        raise error(f"{source}: nested too deeply to read") from None
    except ValueError as exc:  # well-formed YAML whose value Python cannot hold: a date 2020-13-45, a 5000-digit number
        line, value = unreadable_scalar(text)
        raise error(f"{source}:{line}: not valid YAML ({value[:40]!r} cannot be read: "
                    f"{str(exc).split(';')[0]})") from None
    if not isinstance(data, dict) or root is None:  # a mapping always has a node
        raise error(f"{source}:1: {what}")
    twice = repeated_key(root)
    if twice is not None:
        key, first, line = twice
        raise error(f"{source}:{line}: {key!r} is given twice (first on line {first}); give each key once")
    if check is not None:
        check(data, root)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            at = line_of(root, loc)
            path = ".".join(str(p) for p in loc) or "(top level)"
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{source}:{at or 1}: {path}: {msg}")
        raise error("\n".join(lines)) from None


def plain_problem(exc: ValidationError) -> str:
    """The first validation problem's message alone, in plain words."""
    return exc.errors()[0]["msg"].removeprefix("Value error, ")


class OutputError(FramejudgeError, ValueError):
    """An output path that cannot be written; the message names it and why."""

    code = "unwritable_output"


def check_output(path: str | os.PathLike[str], what: str, inputs: Iterable[str | os.PathLike[str] | None] = (),
                 read_back: bool = False) -> None:
    """Refuse, before the work, an output path that cannot take the output: a folder, one of the
    command's inputs, a file or folder that cannot be created or written. Missing parent folders
    are created. Devices and pipes (/dev/stdout) are taken as they are, unless the file is also
    `read_back` (appended to and read again on a rerun), which needs a regular file."""
    p = Path(path)
    if str(path) == "-":  # stdout elsewhere (--summary-json -); a file named '-' is never what is meant
        raise OutputError(f"-: name a file for the {what} (here - is not stdout)")
    if p.is_dir():
        raise OutputError(f"{p}: is a folder, not a file for the {what}")
    for other in inputs:
        if other is not None and (p.absolute() == Path(other).absolute()
                                  or (p.exists() and Path(other).exists() and p.samefile(other))):
            raise OutputError(f"{p}: the {what} would overwrite an input of this command")
    if p.exists() and not p.is_file():
        if read_back:
            raise OutputError(f"{p}: not a regular file (the {what} file is appended to and read back on a rerun)")
        return
    existed = p.exists()
    try:
        _make_folder(p.parent, what)
        with open(p, "a", encoding="utf-8"):
            pass
        if not existed:
            p.unlink()
    except OSError as exc:
        raise OutputError(write_problem(p, what, exc)) from None


def check_output_folder(path: str | os.PathLike[str], what: str) -> None:
    """Refuse, before the work, a folder for output files that cannot be created or written in."""
    import tempfile

    p = Path(path)
    try:
        _make_folder(p, what)
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as exc:
        raise OutputError(write_problem(p, what, exc)) from None


def _make_folder(folder: Path, what: str) -> None:
    for existing in (folder, *folder.parents):
        if existing.is_symlink() and not existing.exists():
            raise OutputError(f"cannot write the {what} under {folder}: {existing} is a symbolic link that leads "
                              "nowhere (a loop, or a missing target)")
        if existing.exists():
            if not existing.is_dir():
                raise OutputError(f"cannot write the {what} under {folder}: {existing} is not a folder")
            break
    folder.mkdir(parents=True, exist_ok=True)


def write_problem(path: str | os.PathLike[str], what: str, exc: OSError) -> str:
    """The message for an output that failed while it was written (a full disk, a quota)."""
    return f"cannot write the {what} to {path}: {exc.strerror or exc}"
