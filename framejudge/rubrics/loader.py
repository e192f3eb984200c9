"""Loading rubric files (YAML), with errors that name the line, and the built-in set."""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path

from ..files import parse_yaml_model
from .model import Rubric


class RubricError(Exception):
    """A rubric file that cannot be used; the message names the file and line."""


def parse_rubric(text: str, source: str = "<rubric>") -> Rubric:
    return parse_yaml_model(text, source, Rubric, RubricError, "a rubric file is a mapping (id, kind, version, ...)")


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


KIND_USE = {
    "video_qa": "grades answers to video questions (framejudge grade, /v1/grade, /v1/jobs)",
    "mcq": "scores multiple-choice replies (framejudge mcq score)",
}


def require_kind(rubric: Rubric, kind: str) -> Rubric:
    """`rubric` when it is of `kind`; a RubricError naming what it is for otherwise."""
    if rubric.kind != kind:
        wanted = ", ".join(r.id for r in builtin_rubrics().values() if r.kind == kind)
        raise RubricError(f"rubric {rubric.id!r} is a {rubric.kind} rubric: it {KIND_USE[rubric.kind]}; "
                          f"this needs a {kind} rubric ({wanted})")
    return rubric
