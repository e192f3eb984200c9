"""Loading rubric files (YAML), with errors that name the line, and the built-in set."""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .model import Rubric


class RubricError(Exception):
    """A rubric file that cannot be used; the message names the file and line."""


def _line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
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


def parse_rubric(text: str, source: str = "<rubric>") -> Rubric:
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise RubricError(f"{where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise RubricError(f"{source}:1: a rubric file is a mapping (id, kind, version, ...)")
    try:
        return Rubric.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            line = _line_of(root, loc)
            path = ".".join(str(p) for p in loc) or "(top level)"
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{source}:{line or 1}: {path}: {msg}")
        raise RubricError("\n".join(lines)) from None


def load_rubric(path: str | os.PathLike[str]) -> Rubric:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RubricError(f"{p}: no such rubric file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RubricError(f"{p}: cannot read ({exc})") from None
    return parse_rubric(text, str(p))


@functools.cache
def _builtin() -> tuple[Rubric, ...]:
    """The packaged rubric files, parsed once per process (they cannot change under it)."""
    out: list[Rubric] = []
    folder = resources.files("framejudge.rubrics") / "builtin"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".yaml", ".yml")):
            out.append(parse_rubric(entry.read_text(encoding="utf-8"), f"builtin/{entry.name}"))
    return tuple(out)


def builtin_rubrics() -> dict[str, Rubric]:
    return {r.id: r for r in _builtin()}


def rubric_dirs() -> list[Path]:
    """Extra folders of user rubrics: FRAMEJUDGE_RUBRICS (os.pathsep-separated)."""
    env = os.environ.get("FRAMEJUDGE_RUBRICS", "")
    return [Path(p) for p in env.split(os.pathsep) if p]


def all_rubrics(extra: list[Path] | None = None) -> dict[str, Rubric]:
    """Built-in rubrics, then user rubrics (a user rubric with a built-in id replaces it)."""
    found = builtin_rubrics()
    for folder in (extra or []) + rubric_dirs():
        for path in sorted(folder.glob("*.y*ml")):
            rubric = load_rubric(path)
            found[rubric.id] = rubric
    return found


def get_rubric(ref: str, extra: list[Path] | None = None) -> Rubric:
    """A rubric by id, or from a file path."""
    if ref.endswith((".yaml", ".yml")) or os.sep in ref:
        return load_rubric(ref)
    known = all_rubrics(extra)
    if ref not in known:
        raise RubricError(f"no rubric with id {ref!r}; known: {', '.join(sorted(known))}")
    return known[ref]
