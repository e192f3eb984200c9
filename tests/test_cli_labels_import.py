"""`framejudge labels import`: a labelling tool's export to the label rows `calibrate --human`
reads, in JSONL or CSV; a bad row, a bad mapping or an output that cannot be written is an error
line and exit 2, with nothing written."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from framejudge.calibration.imports import import_label_studio
from framejudge.calibration.inputs import load_human_labels
from framejudge.cli import app
from tests.calibration.test_imports import LS_MAPPING, POTATO_MAPPING, ls_export, potato_output, write

runner = CliRunner()


def run(*args: object):
    return runner.invoke(app, ["labels", "import", *map(str, args)])


def refused(res, words: str) -> None:
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output and words in res.stderr, res.stderr
    assert res.stderr.startswith("error: "), res.stderr


@pytest.fixture
def files(tmp_path):
    return (write(tmp_path / "export.json", json.dumps(ls_export())), write(tmp_path / "map.yaml", LS_MAPPING))


def test_tasks_nobody_annotated_are_counted_as_left_out(tmp_path):
    tasks = ls_export()
    tasks += [{"id": 40 + k, "data": {"item_id": f"clip-{4 + k}", "domain": "sports"}, "annotations": []}
              for k in range(2)]
    export, mapping = write(tmp_path / "export.json", json.dumps(tasks)), write(tmp_path / "map.yaml", LS_MAPPING)
    labels = import_label_studio(export, mapping)
    assert (len(labels.units), labels.cancelled, labels.empty, labels.unannotated) == (3, 1, 0, 2)
    res = run(export, "--from", "label-studio", "--mapping", mapping, "--out", tmp_path / "labels.jsonl")
    assert res.exit_code == 0, res.output
    assert res.stdout.rstrip().endswith("1 cancelled or skipped annotation(s), 0 with none of the mapped options and "
                                        "2 task(s) with no annotations left out"), res.stdout
    none = write(tmp_path / "none.json", json.dumps([{**t, "annotations": []} for t in tasks]))
    refused(run(none, "--from", "label-studio", "--mapping", mapping, "--out", tmp_path / "n.jsonl"),
            "no labels to import (0 annotation(s) cancelled, 0 that chose none of the mapped options, 5 task(s) "
            "with no annotations)")


def test_label_studio_to_jsonl_and_csv_that_load_back_the_same(tmp_path, files):
    export, mapping = files
    imported = list(import_label_studio(export, mapping))
    for name in ("labels.jsonl", "labels.csv"):
        res = run(export, "--from", "label-studio", "--mapping", mapping, "--out", tmp_path / name)
        assert res.exit_code == 0, res.output
        assert res.stdout.startswith("6 label(s) by 2 annotator(s) on 3 unit(s) written to ")
        assert ("1 cancelled or skipped annotation(s), 0 with none of the mapped options and 0 task(s) with no "
                "annotations left out") in res.stdout
        assert load_human_labels(tmp_path / name) == imported, name
    header = (tmp_path / "labels.csv").read_text().splitlines()[0]
    assert header == ("item_id,turn,annotator,category_a,category_b,preference,integrity_a,integrity_b,"
                      "transcription_error,multiturn,standing,reviewer,decided_at,cause,note,flag_rubric,domain")
    first = json.loads((tmp_path / "labels.jsonl").read_text().splitlines()[0])
    assert first == {"item_id": "clip-1", "turn": 0, "annotator": "ann@x.org", "category_a": "Successful",
                     "category_b": "Not Successful", "preference": "A", "integrity_a": False,
                     "transcription_error": False, "metadata": {"domain": "sports"}}


def test_potato_folder_to_csv(tmp_path):
    root = potato_output(tmp_path / "annotation_output")
    out = tmp_path / "labels.csv"
    res = run(root, "--from", "potato", "--mapping", write(tmp_path / "map.yaml", POTATO_MAPPING), "--out", out)
    assert res.exit_code == 0, res.output
    labels = load_human_labels(out)
    assert len(labels) == 6 and {h.annotator for h in labels} == {"ann", "bob"}
    assert {(h.item_id, h.annotator): h.transcription_error for h in labels}[("clip-1", "bob")] is True


def test_a_bad_row_writes_nothing(tmp_path, files):
    export, mapping = files
    tasks = ls_export()
    tasks[2]["annotations"][0]["result"][0]["value"]["choices"] = ["Gud"]
    export.write_text(json.dumps(tasks))
    out = tmp_path / "labels.jsonl"
    refused(run(export, "--from", "label-studio", "--mapping", mapping, "--out", out),
            f"{export}: task 3 (id 19), annotation 1 (by ann@x.org): choice 'Gud' of control 'quality_a' is not "
            "mapped (the mapping has: Bad answer, Good answer, No answer)")
    assert not out.exists()


def test_the_wrong_tool_and_a_bad_mapping(tmp_path, files):
    export, mapping = files
    out = tmp_path / "labels.jsonl"
    refused(run(export, "--from", "potato", "--mapping", mapping, "--out", out), f"{export}:1: ")
    mapping.write_text(LS_MAPPING.replace("  category_b:", "  category_c:"))
    refused(run(export, "--from", "label-studio", "--mapping", mapping, "--out", out),
            f"{mapping}:9: labels.category_c: not a label field")
    refused(run(export, "--from", "label-studio", "--mapping", tmp_path / "none.yaml", "--out", out),
            "none.yaml: no such mapping file")
    assert not out.exists()


def test_the_output_is_checked_before_anything_is_read(tmp_path, files):
    export, mapping = files
    (tmp_path / "folder.jsonl").mkdir()
    missing = tmp_path / "missing.json"
    refused(run(missing, "--from", "label-studio", "--mapping", mapping, "--out", tmp_path / "folder.jsonl"),
            "folder.jsonl: is a folder, not a file for the labels")
    refused(run(missing, "--from", "label-studio", "--mapping", mapping, "--out", tmp_path / "labels.txt"),
            "--out " + str(tmp_path / "labels.txt") + ": name a .jsonl or .csv file")
    copy = write(tmp_path / "export.jsonl", export.read_text())
    refused(run(copy, "--from", "label-studio", "--mapping", mapping, "--out", copy),
            "the labels would overwrite an input of this command")
    res = run(export, "--from", "prodigy", "--mapping", mapping, "--out", tmp_path / "l.jsonl")
    assert res.exit_code == 2 and "prodigy" in res.output


@pytest.mark.parametrize("value, words", [("2020-13-45", "'2020-13-45' cannot be read: month must be in 1..12"),
                                          ("9" * 5000, "cannot be read: Exceeds the limit (4300 digits)")])
def test_a_mapping_value_yaml_cannot_hold_is_an_error_on_its_line(tmp_path, files, value, words):
    export, mapping = files
    mapping.write_text(LS_MAPPING.replace("  domain: data.domain", f"  domain: data.domain\n  when: {value}"))
    out = tmp_path / "labels.jsonl"
    refused(run(export, "--from", "label-studio", "--mapping", mapping, "--out", out),
            f"{mapping}:5: not valid YAML (")
    assert words in run(export, "--from", "label-studio", "--mapping", mapping, "--out", out).stderr
    assert not out.exists()
