"""Loading rubric files (YAML), with errors that name the line, and the built-in set."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .. import config
from ..errors import FramejudgeError
from ..files import parse_yaml_model, read_text
from .model import Rubric


class RubricError(FramejudgeError):
    """A rubric file that cannot be used; the message names the file and line."""

    code = "invalid_rubric"


def parse_rubric(text: str, source: str = "<rubric>") -> Rubric:
    return parse_yaml_model(text, source, Rubric, RubricError, "a rubric file is a mapping (id, kind, version, ...)")


def load_rubric(path: str | os.PathLike[str]) -> Rubric:
    p = Path(path)
    return parse_rubric(read_text(p, "rubric", RubricError), str(p))


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
    env = config.get("FRAMEJUDGE_RUBRICS") or ""
    return [Path(p) for p in env.split(os.pathsep) if p]


BUILT_IN = "built in"


@dataclass
class RubricScan:
    """The rubrics that can be used, where each came from (a file, or BUILT_IN), and one line
    per file or folder that could not be used."""

    rubrics: dict[str, Rubric] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def scan_rubrics(extra: list[Path] | None = None) -> RubricScan:
    """Built-in rubrics, then the files of `extra` and FRAMEJUDGE_RUBRICS folders. An id is never
    taken twice: a file with a built-in rubric's id, or two files with one id, are problems (the
    built-in stays; neither file is used), as are files that do not load and missing folders."""
    scan = RubricScan()
    for r in _builtin():
        scan.rubrics[r.id], scan.sources[r.id] = r, BUILT_IN
    clashing: set[str] = set()
    for folder in dict.fromkeys([*(extra or []), *rubric_dirs()]):
        if not folder.is_dir():
            scan.problems.append(f"{folder}: no such rubric folder")
            continue
        for path in sorted(folder.glob("*.y*ml")):
            try:
                rubric = load_rubric(path)
            except RubricError as exc:
                scan.problems.append(str(exc))
                continue
            first = scan.sources.get(rubric.id)
            if first == BUILT_IN:
                scan.problems.append(f"{path}: id {rubric.id!r} is a built-in rubric's; give this rubric its own id "
                                     "(the built-in one is used)")
            elif first is not None or rubric.id in clashing:
                scan.problems.append(f"{path}: id {rubric.id!r} is also the id in {first or 'another file'}; "
                                     "give each rubric its own id (neither is used)")
                scan.rubrics.pop(rubric.id, None)
                scan.sources.pop(rubric.id, None)
                clashing.add(rubric.id)
            else:
                scan.rubrics[rubric.id], scan.sources[rubric.id] = rubric, str(path)
    return scan


def all_rubrics(extra: list[Path] | None = None) -> dict[str, Rubric]:
    """The rubrics that can be used (scan_rubrics says which files could not be, and why)."""
    return scan_rubrics(extra).rubrics


def get_rubric(ref: str, extra: list[Path] | None = None) -> Rubric:
    """A rubric by id, or from a file path."""
    if ref.endswith((".yaml", ".yml")) or os.sep in ref:
        return load_rubric(ref)
    return rubric_by_id(ref, extra)


def rubric_by_id(ref: str, extra: list[Path] | None = None) -> Rubric:
    """A rubric by its id only: never a file named by `ref` (what a server uses for an id a
    client sent)."""
    scan = scan_rubrics(extra)
    if ref not in scan.rubrics:
        unusable = "".join(f"\n  {p}" for p in scan.problems)
        raise RubricError(f"no rubric with id {ref!r}; known: {', '.join(sorted(scan.rubrics))}"
                          + (f"; these could not be used:{unusable}" if unusable else ""))
    return scan.rubrics[ref]


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
