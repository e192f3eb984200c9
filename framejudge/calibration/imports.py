"""Human labels from labelling tools (a Label Studio JSON or JSON-MIN export, Potato's annotation
output), turned into framejudge label rows by a mapping file.

Every record that cannot be read or mapped is an error naming the file and the record; nothing is
returned when any is. Cancelled (skipped) annotations are left out and counted, as are annotations
that chose none of the mapped options and tasks that nobody annotated."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..files import NotJSON, first_problem, jsonl_objects, line_of, parse_yaml_model, read_text, strict_json
from ..schema import LABEL_FIELDS, FieldMapping, HumanLabel, LabelMapping, mapping_problems
from .audit import JUDGE
from .inputs import LabelsError, unique_labels

MISSING = object()


class ImportedLabels(list[HumanLabel]):
    """The labels of an export, with what was left out of it."""

    def __init__(self, labels: Iterable[HumanLabel] = (), cancelled: int = 0, empty: int = 0,
                 unannotated: int = 0) -> None:
        super().__init__(labels)
        self.cancelled = cancelled  # cancelled or skipped annotations
        self.empty = empty  # annotations that chose none of the mapped options
        self.unannotated = unannotated  # tasks with no annotation at all

    @property
    def left_out(self) -> str:
        """What the export held that gave no label, in words."""
        return (f"{self.cancelled} cancelled or skipped annotation(s), {self.empty} with none of the mapped options "
                f"and {self.unannotated} task(s) with no annotations")

    @property
    def annotators(self) -> list[str]:
        return sorted({label.annotator for label in self})

    @property
    def units(self) -> list[tuple[str, int]]:
        return sorted({(label.item_id, label.turn) for label in self})


# --------------------------------------------------------------------------- the mapping file

def load_mapping(path: str | os.PathLike[str]) -> LabelMapping:
    """A mapping file (YAML or JSON); a problem is 'file:line: key: why'."""
    p = Path(path)
    text = read_text(p, "mapping", LabelsError)

    def check(data: dict[str, Any], root: yaml.Node) -> None:
        """The label fields' problems on the line they are on (the model says what, not where)."""
        labels = data.get("labels")
        for field, spec in labels.items() if isinstance(labels, dict) else ():
            where = ("labels", str(field))
            if field not in LABEL_FIELDS:
                raise LabelsError(f"{p}:{line_of(root, where) or 1}: labels.{field}: not a label field (they are: "
                                  f"{', '.join(LABEL_FIELDS)})")
            try:
                parsed = FieldMapping.model_validate(spec)
            except ValidationError:
                continue  # the model says it, with its line
            for key, problem in mapping_problems(field, parsed):
                line = line_of(root, (*where, *key.split(".", 1)))
                raise LabelsError(f"{p}:{line or 1}: labels.{field}.{key}: {problem}")

    return parse_yaml_model(text, str(p), LabelMapping, LabelsError, "a mapping file is a mapping with item_id "
                            "and labels (framejudge field -> control and values)", check=check)


def _mapping(mapping: LabelMapping | str | os.PathLike[str]) -> LabelMapping:
    return mapping if isinstance(mapping, LabelMapping) else load_mapping(mapping)


# --------------------------------------------------------------------------- records

def lookup(record: Any, path: str) -> Any:
    """The value at a dotted path (a number part indexes a list), or MISSING."""
    node = record
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and (i := _index(part)) is not None and i < len(node):
            node = node[i]
        else:
            return MISSING
    return node


def _index(text: str) -> int | None:
    """A whole number written in ASCII digits (not '²', not thousands of digits), else None."""
    return int(text) if re.fullmatch(r"[0-9]{1,9}", text) else None


def _text(value: Any) -> str | None:
    """An id or a name: text, or a whole number written as text."""
    if isinstance(value, bool) or value is None or value is MISSING:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def _shown(value: Any) -> str:
    """A value from the export in a message: text quoted, and cut short when it is long."""
    if isinstance(value, str) and len(value) > 60:
        return f"{value[:40]!r}... ({len(value)} characters)"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 80 else text[:60] + "..."


@dataclass
class _Record:
    """One annotator's annotation of one unit, before mapping."""

    where: str  # for messages: the file and the record
    item: Any  # what the item id, turn and metadata paths read
    annotator: str | None
    no_annotator: str  # why there is none, when there is none
    options: dict[str, list[Any]]  # control -> the options chosen


def _label(rec: _Record, mapping: LabelMapping, kind: str) -> HumanLabel | None:
    """The label of one record, or None when it chose none of the mapped options."""
    raw_id = lookup(rec.item, mapping.item_id)
    item_id = _text(raw_id)
    if item_id is None:
        raise LabelsError(f"{rec.where}: no item id at {mapping.item_id} (found {_found(raw_id)})")
    turn: Any = 0
    if mapping.turn is not None:
        raw = lookup(rec.item, mapping.turn)
        turn = _index(raw.strip()) if isinstance(raw, str) else raw
        if isinstance(turn, bool) or not isinstance(turn, int) or turn < 0:
            raise LabelsError(f"{rec.where}: no turn index (a whole number >= 0) at {mapping.turn} "
                              f"(found {_found(raw)})")
    if rec.annotator is None:
        raise LabelsError(f"{rec.where}: {rec.no_annotator}")
    if rec.annotator == JUDGE:
        raise LabelsError(f"{rec.where}: annotator name {JUDGE!r} is kept for the judge")
    values: dict[str, Any] = {}
    chose = False
    for control, fields in _by_control(mapping).items():
        chosen = rec.options.get(control, [])
        for option in chosen:
            if not any(str(option) in _keys(spec) for _, spec in fields):
                known = sorted({k for _, spec in fields for k in _keys(spec)})
                raise LabelsError(f"{rec.where}: {kind} {_shown(option)} of {_control_word(kind)} {control!r} is "
                                  f"not mapped (the mapping has: {', '.join(known)})")
        for field, spec in fields:
            keys = _keys(spec)
            mapped = sorted({str(o) for o in chosen if str(o) in keys})
            taken = {spec.values[keys[k]] for k in mapped}
            if len(taken) > 1:
                raise LabelsError(f"{rec.where}: {_control_word(kind)} {control!r} gives {field} "
                                  f"{len(taken)} values ({kind}s {', '.join(map(repr, mapped))} map to "
                                  f"{', '.join(sorted(map(str, taken)))}); it takes one")
            if taken:
                values[field] = taken.pop()
                chose = True
            elif spec.absent is not None:
                values[field] = spec.absent
    if not chose:
        return None
    metadata = {}
    for name, path in mapping.metadata.items():
        value = lookup(rec.item, path)
        if value is not MISSING and value is not None:
            metadata[name] = value
    try:
        return HumanLabel.model_validate({"item_id": item_id, "turn": turn, "annotator": rec.annotator,
                                          "metadata": metadata, **values})
    except ValidationError as exc:
        raise LabelsError(f"{rec.where}: {first_problem(exc)}") from None


def _found(value: Any) -> str:
    return "nothing" if value is MISSING else _shown(value)


def _by_control(mapping: LabelMapping) -> dict[str, list[tuple[str, FieldMapping]]]:
    """control -> the label fields it feeds (a multiple-choice control may feed several flags)."""
    out: dict[str, list[tuple[str, FieldMapping]]] = {}
    for field, spec in mapping.labels.items():
        out.setdefault(spec.control, []).append((field, spec))
    return out


def _keys(spec: FieldMapping) -> dict[str, str | int]:
    """The mapping's options by their text (a tool's 5 and a mapping's '5' are one option)."""
    return {str(k): k for k in spec.values}


def _control_word(kind: str) -> str:
    return "control" if kind == "choice" else "scheme"


def _labels(records: Iterable[_Record], mapping: LabelMapping, kind: str, source: str, cancelled: int,
            seen: set[str], unannotated: int = 0) -> ImportedLabels:
    """The records' labels; `seen`: the controls the export has, to catch a control misnamed in the mapping."""
    pairs: list[tuple[str, HumanLabel]] = []
    empty = 0
    for rec in records:
        label = _label(rec, mapping, kind)
        if label is None:
            empty += 1
        else:
            pairs.append((rec.where, label))
    unused = [(field, spec.control) for field, spec in mapping.labels.items() if spec.control not in seen]
    if unused and (pairs or empty):
        field, control = unused[0]
        raise LabelsError(f"{source}: {_control_word(kind)} {control!r} (mapped to {field}) is in no annotation; "
                          f"the annotations have: {', '.join(sorted(seen)) or 'none'}")
    labels = ImportedLabels(unique_labels(pairs, LabelsError), cancelled=cancelled, empty=empty,
                            unannotated=unannotated)
    if not labels:
        raise LabelsError(f"{source}: no labels to import ({cancelled} annotation(s) cancelled, {empty} that chose "
                          f"none of the mapped options, {unannotated} task(s) with no annotations)")
    return labels


# --------------------------------------------------------------------------- Label Studio

LS_VALUE_KEYS = ("choices", "rating", "number", "text", "labels", "taxonomy")
LS_MIN_KEYS = ("id", "annotator", "annotation_id", "created_at", "updated_at", "lead_time", "agreement")


def import_label_studio(export_path: str | os.PathLike[str],
                        mapping: LabelMapping | str | os.PathLike[str]) -> ImportedLabels:
    """The labels of a Label Studio JSON export (a list of tasks, each with its annotations), or of a
    JSON-MIN export (one flat record per annotation: the task's data, the annotator and each control's
    choices at the top, so a `data.` path is read there without its prefix)."""
    the_mapping = _mapping(mapping)
    p = Path(export_path)
    text = read_text(p, "Label Studio export", LabelsError)
    try:
        tasks = strict_json(text)
    except NotJSON as exc:
        raise LabelsError(f"{p}: {exc}") from None
    if isinstance(tasks, dict) and "annotations" in tasks:  # one task (a cloud storage file)
        tasks = [tasks]
    if not isinstance(tasks, list):
        raise LabelsError(f"{p}: a Label Studio export is a list of tasks (export as JSON or JSON-MIN)")
    seen: set[str] = set()
    records: list[_Record] = []
    cancelled = unannotated = 0
    for n, task in enumerate(tasks, 1):
        where = f"{p}: task {n}" + (f" (id {task['id']})" if isinstance(task, dict) and _text(task.get("id")) else "")
        if not isinstance(task, dict):
            raise LabelsError(f"{where}: a task is a JSON object")
        if "annotations" in task:
            cancelled += _ls_task(task, where, the_mapping, records, seen)
            unannotated += task["annotations"] == []  # in the export, but nobody labelled it
        elif "annotator" in task or "annotation_id" in task:
            records.append(_ls_min_record(task, where, the_mapping, seen))
        else:
            raise LabelsError(f"{where}: neither an annotations list (a JSON export) nor an annotator (JSON-MIN)")
    return _labels(records, the_mapping, "choice", str(p), cancelled, seen, unannotated)


def _ls_task(task: dict[str, Any], where: str, mapping: LabelMapping, records: list[_Record],
             seen: set[str]) -> int:
    """Adds the task's annotations to `records`; returns how many were cancelled."""
    annotations = task["annotations"]
    if not isinstance(annotations, list):
        raise LabelsError(f"{where}: annotations is not a list")
    mapped = _by_control(mapping)
    cancelled = 0
    for i, ann in enumerate(annotations, 1):
        if not isinstance(ann, dict):
            raise LabelsError(f"{where}, annotation {i}: an annotation is a JSON object")
        if mapping.annotator is not None:
            raw = lookup(ann, mapping.annotator)
            no_annotator = f"no annotator at {mapping.annotator} (found {_found(raw)})"
        else:
            raw = _ls_user(ann.get("completed_by"))
            no_annotator = ("no completed_by (who made the annotation); name where the annotator is "
                            "(annotator: in the mapping)")
        annotator = _text(raw)
        at = f"{where}, annotation {i}" + (f" (by {annotator})" if annotator else "")
        if ann.get("was_cancelled") is True:
            cancelled += 1
            continue
        result = ann.get("result", [])
        if not isinstance(result, list):
            raise LabelsError(f"{at}: result is not a list")
        options: dict[str, list[Any]] = {}
        for j, region in enumerate(result, 1):
            if not isinstance(region, dict) or not isinstance(region.get("from_name"), str):
                raise LabelsError(f"{at}: result {j} has no from_name (the control it comes from)")
            name = region["from_name"]
            seen.add(name)
            if name in mapped:  # other controls (a comment box, regions) are not labels here
                options.setdefault(name, []).extend(_ls_values(region, f"{at}: result {j} (control {name!r})"))
        records.append(_Record(where=at, item=task, annotator=annotator, no_annotator=no_annotator, options=options))
    return cancelled


def _ls_user(completed_by: Any) -> Any:
    """completed_by is a user id, or the user (id, email, names) in newer exports."""
    if isinstance(completed_by, dict):
        return completed_by.get("email") or completed_by.get("id")
    return completed_by


def _ls_values(region: dict[str, Any], at: str) -> list[Any]:
    value = region.get("value")
    if not isinstance(value, dict):
        raise LabelsError(f"{at}: no value")
    key = next((k for k in LS_VALUE_KEYS if k in value), None)
    if key is None:
        raise LabelsError(f"{at}: a {region.get('type', 'result')} result has none of {', '.join(LS_VALUE_KEYS)}")
    return _options(value[key], at)


def _options(value: Any, at: str) -> list[Any]:
    """The options in a value: one, or a list of them (a taxonomy's path counts as its last step)."""
    out = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, list) and item:
            item = item[-1]
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise LabelsError(f"{at}: {_shown(item)} is not an option")
        out.append(item)
    return out


def _ls_min_record(rec: dict[str, Any], where: str, mapping: LabelMapping, seen: set[str]) -> _Record:
    """A JSON-MIN record: one choice as itself, several as {"choices": [...]}, other results as their value."""
    if mapping.annotator is not None and lookup(rec, mapping.annotator) is not MISSING:
        raw = lookup(rec, mapping.annotator)
    else:
        raw = rec.get("annotator")
    annotator = _text(raw)
    at = where + (f" (by {annotator})" if annotator else "")
    seen.update(k for k in rec if k not in LS_MIN_KEYS)
    options: dict[str, list[Any]] = {}
    for control in _by_control(mapping):
        if rec.get(control) is None:
            continue
        found: list[Any] = []
        for item in rec[control] if isinstance(rec[control], list) else [rec[control]]:
            if isinstance(item, dict):
                key = next((k for k in LS_VALUE_KEYS if k in item), None)
                if key is None:
                    raise LabelsError(f"{at}: control {control!r}: {item!r} has none of {', '.join(LS_VALUE_KEYS)}")
                item = item[key]
            found.extend(_options(item, f"{at}: control {control!r}"))
        options[control] = found
    return _Record(where=at, item={**rec, "data": rec}, annotator=annotator,
                   no_annotator=f"no annotator (found {_found(raw)})", options=options)


# --------------------------------------------------------------------------- Potato

POTATO_FILES = ("annotated_instances.jsonl", "annotated_instances.json")
POTATO_VALUE_LABELS = ("select-one", "text_box")  # a drop-down's choice, a text box's text: the value


def import_potato(path: str | os.PathLike[str], mapping: LabelMapping | str | os.PathLike[str]) -> ImportedLabels:
    """The labels of Potato's annotation output: its folder (a folder per user, each holding
    annotated_instances.jsonl) or one user's file. Each line is an instance's annotation, with its
    id and label_annotations {scheme: {label: value}}: the labels present are the options chosen
    (for a drop-down, select-one, and a text box, text_box, the value is). The user is the folder's
    name unless the mapping names a field of the record (annotator:)."""
    the_mapping = _mapping(mapping)
    p = Path(path)
    records: list[_Record] = []
    seen: set[str] = set()
    for f in _potato_files(p):
        text = read_text(f, "Potato annotation", LabelsError)
        for n, row in jsonl_objects(f, text, LabelsError):
            records.append(_potato_record(f, n, row, the_mapping, seen))
    return _labels(records, the_mapping, "option", str(p), 0, seen)


def _potato_files(p: Path) -> list[Path]:
    if not p.is_dir():
        return [p]  # read_text says what is wrong with it, if anything
    files = []
    for user in sorted(p.iterdir()):
        found = next((user / name for name in POTATO_FILES if (user / name).is_file()), None)
        if user.is_dir() and found is not None:
            files.append(found)
    if not files:
        raise LabelsError(f"{p}: no user folders with {POTATO_FILES[0]} (Potato's output_annotation_dir has one "
                          "folder per user)")
    return files


def _potato_record(f: Path, n: int, row: dict[str, Any], mapping: LabelMapping, seen: set[str]) -> _Record:
    if mapping.annotator is not None:
        raw = lookup(row, mapping.annotator)
        no_annotator = f"no annotator at {mapping.annotator} (found {_found(raw)})"
    else:
        raw, no_annotator = f.parent.name, "no user folder"
    annotator = _text(raw)
    about = [f"id {row['id']}"] if _text(row.get("id")) else []
    about += [f"by {annotator}"] if annotator else []
    at = f"{f}:{n}" + (f" ({', '.join(about)})" if about else "")
    annotations = row.get("label_annotations", {})
    if not isinstance(annotations, dict):
        raise LabelsError(f"{at}: label_annotations is not an object")
    options: dict[str, list[Any]] = {}
    for scheme, chosen in annotations.items():
        if not isinstance(chosen, dict):
            raise LabelsError(f"{at}: scheme {scheme!r} is not an object of labels")
        seen.add(scheme)
        options[scheme] = [option for label, value in chosen.items()
                           for option in _options(value if label in POTATO_VALUE_LABELS else label,
                                                  f"{at}: scheme {scheme!r}")]
    return _Record(where=at, item=row, annotator=annotator, no_annotator=no_annotator, options=options)
