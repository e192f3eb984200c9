"""framejudge labels: human labels from labelling tools."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from .console import out
from .outputs import check_outputs, report_problems, write_output

labels_app = typer.Typer(help="Human labels: import from labelling tools.", no_args_is_help=True)


class Tool(str, Enum):
    label_studio = "label-studio"
    potato = "potato"


@labels_app.command("import")
def labels_import(
    export: Annotated[Path, typer.Argument(help="the tool's export: Label Studio's JSON (or JSON-MIN) file; Potato's "
                                                "annotation output folder (a folder per user) or one user's "
                                                "annotated_instances.jsonl")],
    tool: Annotated[Tool, typer.Option("--from", help="the tool that wrote the export")],
    mapping: Annotated[Path, typer.Option(help="mapping file (YAML or JSON): where the item id, turn and annotator "
                                               "are, and which control (with which options) each label field is")],
    out_path: Annotated[Path, typer.Option("--out", help="label rows for `framejudge calibrate --human`: .jsonl or "
                                                         ".csv")],
) -> None:
    """Turn a labelling tool's export into framejudge label rows."""
    from ..calibration.adjudication import label_rows_csv, label_rows_jsonl
    from ..calibration.imports import import_label_studio, import_potato, load_mapping
    from ..files import OutputError

    suffix = out_path.suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise OutputError(f"--out {out_path}: name a .jsonl or .csv file (the label row formats)")
    check_outputs({"labels": out_path}, inputs=[export, mapping])
    the_mapping = load_mapping(mapping)
    read = import_label_studio if tool is Tool.label_studio else import_potato
    labels = read(export, the_mapping)
    text = label_rows_csv(labels) if suffix == ".csv" else label_rows_jsonl(labels)
    report_problems([write_output(out_path, "labels", text)])
    out.print(f"{len(labels)} label(s) by {len(labels.annotators)} annotator(s) on {len(labels.units)} unit(s) "
              f"written to {out_path}; {labels.left_out} left out", highlight=False, soft_wrap=True)
