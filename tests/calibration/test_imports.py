"""Human labels from Label Studio and Potato exports, written here by hand in the tools' documented
formats, mapped by a mapping file onto the label fields and fed to the real audit; every record
that cannot be read or mapped is an error naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from framejudge.calibration.audit import LabelRow, audit
from framejudge.calibration.imports import import_label_studio, import_potato, load_mapping
from framejudge.calibration.inputs import LabelsError, human_rows, video_qa_fields
from framejudge.schema import HumanLabel

LS_MAPPING = """\
item_id: data.item_id
annotator: completed_by.email
metadata:
  domain: data.domain
labels:
  category_a:
    control: quality_a
    values: {"Good answer": Successful, "Bad answer": Not Successful, "No answer": Missing}
  category_b:
    control: quality_b
    values: {"Good answer": Successful, "Bad answer": Not Successful, "No answer": Missing}
  preference:
    control: pref
    values: {Left: A, Right: B, Tie: Both, Neither: Neither}
  transcription_error:
    control: flags
    values: {"Transcription error": true}
    absent: false
  integrity_a:
    control: flags
    values: {"Violation in A": true}
    absent: false
"""

# (item, annotator) -> (quality_a, quality_b, pref, flags)
ANSWERS = {
    ("clip-1", "ann"): ("Good answer", "Bad answer", "Left", []),
    ("clip-1", "bob"): ("Good answer", "Bad answer", "Left", ["Transcription error"]),
    ("clip-2", "ann"): ("Bad answer", "Good answer", "Right", []),
    ("clip-2", "bob"): ("Good answer", "Good answer", "Tie", []),
    ("clip-3", "ann"): ("Good answer", "No answer", "Left", ["Violation in A"]),
    ("clip-3", "bob"): ("Good answer", "No answer", "Left", []),
}
ITEMS = ["clip-1", "clip-2", "clip-3"]
USER_IDS = {"ann": 1, "bob": 2}


def choices(name: str, picked: list[str]) -> dict:
    return {"id": f"r-{name}", "from_name": name, "to_name": "video", "type": "choices", "origin": "manual",
            "value": {"choices": picked}}


def ls_annotation(n: int, who: str, answer: tuple) -> dict:
    qa, qb, pref, flags = answer
    result = [choices("quality_a", [qa]), choices("quality_b", [qb]), choices("pref", [pref]),
              {"id": "c1", "from_name": "comment", "to_name": "video", "type": "textarea",
               "value": {"text": ["looked fine"]}}]
    if flags:
        result.append(choices("flags", flags))
    return {"id": n, "completed_by": {"id": USER_IDS[who], "email": f"{who}@x.org", "first_name": who, "last_name": ""},
            "result": result, "was_cancelled": False, "ground_truth": False, "lead_time": 12.5,
            "created_at": "2024-05-01T10:00:00Z", "updated_at": "2024-05-01T10:00:00Z", "task": 16 + n}


def ls_export(answers: dict = ANSWERS) -> list[dict]:
    tasks = []
    for i, item in enumerate(ITEMS):
        anns = [ls_annotation(10 * i + k, who, answers[(item, who)]) for k, who in enumerate(("ann", "bob"))
                if (item, who) in answers]
        if item == "clip-3":  # carol skipped it
            anns.append({"id": 99, "completed_by": {"id": 7, "email": "carol@x.org"}, "result": [],
                         "was_cancelled": True, "ground_truth": False})
        tasks.append({"id": 17 + i, "data": {"item_id": item, "video": f"/data/{item}.mp4", "domain": "sports"},
                      "annotations": anns, "predictions": [], "project": 3,
                      "created_at": "2024-05-01T09:00:00Z"})
    return tasks


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def ls_files(tmp_path):
    return (write(tmp_path / "export.json", json.dumps(ls_export(), indent=1)),
            write(tmp_path / "map.yaml", LS_MAPPING))


def expected_labels(annotator_name) -> list[tuple]:
    pref = {"Left": "A", "Right": "B", "Tie": "Both"}
    cat = {"Good answer": "Successful", "Bad answer": "Not Successful", "No answer": "Missing"}
    return sorted((item, annotator_name(who), cat[qa], cat[qb], pref[p], "Transcription error" in f,
                   "Violation in A" in f) for (item, who), (qa, qb, p, f) in ANSWERS.items())


def summary(labels: list[HumanLabel]) -> list[tuple]:
    return sorted((h.item_id, h.annotator, h.category_a.value, h.category_b.value, h.preference.value,
                   h.transcription_error, h.integrity_a) for h in labels)


def check_audit(labels: list[HumanLabel]) -> None:
    """The imported labels in the real audit: the agreement worked out by hand from ANSWERS."""
    judge = [LabelRow(item_id=item, annotator="judge", values={"category_a": cat})
             for item, cat in zip(ITEMS, ["Successful", "Successful", "Not Successful"])]
    result = audit(human_rows(labels), judge, video_qa_fields(), replicates=20, seed=0)
    by = {f.field: f for f in result.fields}
    assert by["category_a"].units == 3 and by["category_a"].human_percent.value == pytest.approx(2 / 3)
    assert by["category_b"].human_percent.value == pytest.approx(1.0)
    assert by["preference"].human_percent.value == pytest.approx(2 / 3)
    assert by["transcription_error"].human_percent.value == pytest.approx(2 / 3)
    assert by["integrity_a"].human_percent.value == pytest.approx(2 / 3)
    # the judge against the majority: clip-1 agrees, clip-2 is a tie (no gold), clip-3 disagrees
    assert by["category_a"].majority_ties == 1
    assert by["category_a"].judge_percent.value == pytest.approx(0.5) and by["category_a"].judge_percent.units == 2


def test_label_studio_export_into_the_audit(ls_files):
    export, mapping = ls_files
    labels = import_label_studio(export, mapping)
    assert summary(labels) == expected_labels(lambda who: f"{who}@x.org")
    assert labels.cancelled == 1 and labels.empty == 0
    assert labels.annotators == ["ann@x.org", "bob@x.org"] and len(labels.units) == 3
    assert all(h.metadata == {"domain": "sports"} and h.turn == 0 for h in labels)
    check_audit(labels)


def test_label_studio_json_min_export(tmp_path):
    records = []
    for (item, who), (qa, qb, pref, flags) in ANSWERS.items():
        record = {"id": ITEMS.index(item) + 17, "item_id": item, "video": f"/data/{item}.mp4", "domain": "sports",
                  "quality_a": qa, "quality_b": qb, "pref": pref, "comment": "looked fine",
                  "annotator": f"{who}@x.org", "annotation_id": len(records) + 1,
                  "created_at": "2024-05-01T10:00:00Z", "updated_at": "2024-05-01T10:00:00Z", "lead_time": 3.0}
        if len(flags) == 1:  # JSON-MIN writes one choice as itself, several as {"choices": [...]}
            record["flags"] = flags[0]
        records.append(record)
    records[0]["flags"] = {"choices": ["Transcription error"]}
    export = write(tmp_path / "min.json", json.dumps(records))
    labels = import_label_studio(export, write(tmp_path / "map.yaml", LS_MAPPING))
    got = {(h.item_id, h.annotator): h for h in labels}
    assert got[("clip-1", "ann@x.org")].transcription_error is True  # the {"choices": [...]} form
    assert got[("clip-3", "ann@x.org")].integrity_a is True and got[("clip-2", "bob@x.org")].preference.value == "Both"
    assert len(labels) == 6 and labels.cancelled == 0 and labels.annotators == ["ann@x.org", "bob@x.org"]


def test_label_studio_user_ids_and_turns(tmp_path):
    tasks = ls_export()
    for task in tasks:
        task["data"]["turn"] = "1"  # data fields from an imported CSV are text
        for ann in task["annotations"]:
            ann["completed_by"] = ann["completed_by"]["id"]  # older exports: the user's id
    mapping = LS_MAPPING.replace("annotator: completed_by.email\n", "turn: data.turn\n")
    labels = import_label_studio(write(tmp_path / "e.json", json.dumps(tasks)), write(tmp_path / "m.yaml", mapping))
    assert {h.turn for h in labels} == {1} and labels.annotators == ["1", "2"]


POTATO_MAPPING = """\
item_id: id
labels:
  category_a:
    control: quality_a
    values: {"Good answer": Successful, "Bad answer": Not Successful, "No answer": Missing}
  category_b:
    control: quality_b
    values: {"Good answer": Successful, "Bad answer": Not Successful, "No answer": Missing}
  preference:
    control: pref
    values: {Left: A, Right: B, Tie: Both, Neither: Neither}
  transcription_error:
    control: flags
    values: {"Transcription error": true}
    absent: false
  integrity_a:
    control: flags
    values: {"Violation in A": true}
    absent: false
"""


def potato_line(item: str, answer: tuple, drop_down: bool = False) -> dict:
    qa, qb, pref, flags = answer
    labels = {"quality_a": {qa: "1"}, "quality_b": {qb: "2"},
              "pref": {"select-one": pref} if drop_down else {pref: "1"}, "notes": {"text_box": "fine"}}
    if flags:
        labels["flags"] = {f: "true" for f in flags}
    return {"id": item, "displayed_text": f"<video src='{item}.mp4'>", "label_annotations": labels,
            "span_annotations": [], "behavioral_data": {"time_string": "Time spent: 0d 0h 0m 5s "}}


def potato_output(root: Path, drop_down: bool = False) -> Path:
    for who in ("ann", "bob"):
        lines = [json.dumps(potato_line(item, ANSWERS[(item, who)], drop_down)) for item in ITEMS]
        write(root / who / "annotated_instances.jsonl", "\n".join(lines) + "\n")
        write(root / who / "assigned_user_data.json", "{}")
    return root


def test_potato_output_folder_into_the_audit(tmp_path):
    root = potato_output(tmp_path / "annotation_output")
    write(root / "archive" / "notes.txt", "not a user")  # a folder without annotations is not a user
    labels = import_potato(root, write(tmp_path / "map.yaml", POTATO_MAPPING))
    assert summary(labels) == expected_labels(lambda who: who)
    assert labels.annotators == ["ann", "bob"] and labels.cancelled == 0
    check_audit(labels)


def test_potato_drop_downs_one_file_and_a_user_field(tmp_path):
    root = potato_output(tmp_path / "out", drop_down=True)
    mapping = write(tmp_path / "map.yaml", POTATO_MAPPING)
    one = import_potato(root / "bob" / "annotated_instances.jsonl", mapping)
    assert {h.annotator for h in one} == {"bob"} and {h.item_id: h.preference.value for h in one} == {
        "clip-1": "A", "clip-2": "Both", "clip-3": "A"}
    rows = [json.dumps({**potato_line(item, ANSWERS[(item, who)]), "user": f"{who}-7"})
            for who in ("ann", "bob") for item in ITEMS]
    combined = write(tmp_path / "all" / "annotated_instances.jsonl", "\n".join(rows))
    labels = import_potato(combined, write(tmp_path / "m2.yaml", "annotator: user\n" + POTATO_MAPPING))
    assert labels.annotators == ["ann-7", "bob-7"] and len(labels) == 6


def test_labels_with_no_mapped_option_are_left_out_and_counted(tmp_path):
    root = potato_output(tmp_path / "out")
    extra = {"id": "clip-4", "displayed_text": "", "label_annotations": {"notes": {"text_box": "could not play"}}}
    with (root / "ann" / "annotated_instances.jsonl").open("a") as f:
        f.write(json.dumps(extra) + "\n")
    labels = import_potato(root, write(tmp_path / "map.yaml", POTATO_MAPPING))
    assert labels.empty == 1 and len(labels) == 6 and "clip-4" not in {h.item_id for h in labels}


# --------------------------------------------------------------------------- errors, naming the row


def refused(call, words: str) -> None:
    with pytest.raises(LabelsError) as caught:
        call()
    assert words in str(caught.value), str(caught.value)


def test_an_unmapped_choice_names_the_task_the_annotation_and_the_options(tmp_path, ls_files):
    export, mapping = ls_files
    tasks = ls_export()
    tasks[2]["annotations"][0]["result"][0]["value"]["choices"] = ["Gud"]
    export.write_text(json.dumps(tasks))
    refused(lambda: import_label_studio(export, mapping),
            f"{export}: task 3 (id 19), annotation 1 (by ann@x.org): choice 'Gud' of control 'quality_a' is not "
            "mapped (the mapping has: Bad answer, Good answer, No answer)")


def test_an_unmapped_potato_option_names_the_line(tmp_path):
    root = potato_output(tmp_path / "out")
    path = root / "bob" / "annotated_instances.jsonl"
    path.write_text(path.read_text().replace('"Tie"', '"Draw"'))
    refused(lambda: import_potato(root, write(tmp_path / "map.yaml", POTATO_MAPPING)),
            f"{path}:2 (id clip-2, by bob): option 'Draw' of scheme 'pref' is not mapped (the mapping has: Left, "
            "Neither, Right, Tie)")


@pytest.mark.parametrize("change, words", [
    (lambda t: t[1]["data"].pop("item_id"), "task 2 (id 18), annotation 1 (by ann@x.org): no item id at "
                                            "data.item_id (found nothing)"),
    (lambda t: t[1]["data"].update(item_id=""), "task 2 (id 18), annotation 1 (by ann@x.org): no item id at "
                                                "data.item_id (found '')"),
    (lambda t: t[1]["data"].update(item_id="clip-1"), "task 2 (id 18), annotation 1 (by ann@x.org): ann@x.org "
                                                      "labelled item clip-1 turn 0 twice"),
    (lambda t: t[0]["annotations"][1]["completed_by"].pop("email"), "task 1 (id 17), annotation 2: no annotator at "
                                                                    "completed_by.email (found nothing)"),
    (lambda t: t[0]["annotations"][1]["completed_by"].update(email="judge"),
     "task 1 (id 17), annotation 2 (by judge): annotator name 'judge' is kept for the judge"),
    (lambda t: t[0]["annotations"][0]["result"][2]["value"].update(choices=["Left", "Right"]),
     "task 1 (id 17), annotation 1 (by ann@x.org): control 'pref' gives preference 2 values (choices 'Left', "
     "'Right' map to A, B); it takes one"),
    (lambda t: t[0]["annotations"][0]["result"][0].pop("from_name"),
     "task 1 (id 17), annotation 1 (by ann@x.org): result 1 has no from_name"),
    (lambda t: t[0]["annotations"][0]["result"][0].update(value={"x": 1}),
     "task 1 (id 17), annotation 1 (by ann@x.org): result 1 (control 'quality_a'): a choices result has none of"),
    (lambda t: t[0].pop("annotations"), "task 1 (id 17): neither an annotations list"),
    (lambda t: t[0].update(annotations={}), "task 1 (id 17): annotations is not a list"),
    (lambda t: t.append(3), "task 4: a task is a JSON object"),
    (lambda t: [r.update(from_name="Pref") for task in t for a in task["annotations"] for r in a["result"]
                if r["from_name"] == "pref"],
     "control 'pref' (mapped to preference) is in no annotation; the annotations have: Pref, comment, flags, "
     "quality_a, quality_b"),
    (lambda t: [a.update(was_cancelled=True) for task in t for a in task["annotations"]],
     "no labels to import (7 annotation(s) cancelled, 0 that chose none of the mapped options, 0 task(s) with no "
     "annotations)"),
])
def test_bad_label_studio_records(ls_files, change, words):
    export, mapping = ls_files
    tasks = ls_export()
    change(tasks)
    export.write_text(json.dumps(tasks))
    refused(lambda: import_label_studio(export, mapping), words)


@pytest.mark.parametrize("text, words", [
    ('[{"id": 1, "data": {}, "annotations": []},]', ": not JSON ("),
    ('[{"id": 1, "id": 2}]', ": key 'id' given twice"),
    ('{"tasks": []}', ": a Label Studio export is a list of tasks"),
    ("", ": not JSON ("),
])
def test_label_studio_files_that_are_not_exports(ls_files, text, words):
    export, mapping = ls_files
    export.write_text(text)
    refused(lambda: import_label_studio(export, mapping), f"{export}{words}")


def test_bad_potato_output(tmp_path):
    mapping = write(tmp_path / "map.yaml", POTATO_MAPPING)
    root = potato_output(tmp_path / "out")
    path = root / "ann" / "annotated_instances.jsonl"
    path.write_text(path.read_text() + '{"id": "clip-9", "label_annotations": \n')
    refused(lambda: import_potato(root, mapping), f"{path}:4: not JSON (")
    path.write_text(json.dumps({"id": "clip-9", "label_annotations": {"pref": "Left"}}) + "\n")
    refused(lambda: import_potato(root, mapping), f"{path}:1 (id clip-9, by ann): scheme 'pref' is not an object")
    path.write_text(json.dumps({"label_annotations": {"pref": {"Left": "1"}}}) + "\n")
    refused(lambda: import_potato(root, mapping), f"{path}:1 (by ann): no item id at id (found nothing)")
    path.write_text("\n".join(json.dumps(potato_line("clip-1", ANSWERS[("clip-1", "ann")])) for _ in range(2)))
    refused(lambda: import_potato(root, mapping), f"{path}:2 (id clip-1, by ann): ann labelled item clip-1 turn 0 twice")
    refused(lambda: import_potato(tmp_path / "nothing", mapping), "nothing: no such Potato annotation file")
    (tmp_path / "empty" / "ann").mkdir(parents=True)
    refused(lambda: import_potato(tmp_path / "empty", mapping), "empty: no user folders with annotated_instances.jsonl")


@pytest.mark.parametrize("turn, found", [("second", "'second'"), ("\u00b2", "'\u00b2'"), (-1, "-1"), (True, "True"),
                                         ("9" * 5000, "'" + "9" * 40 + "'... (5000 characters)"), (1.5, "1.5")])
def test_a_turn_that_is_not_an_index(ls_files, turn, found):
    export, mapping = ls_files
    tasks = ls_export()
    for task in tasks:
        task["data"]["turn"] = 0
    tasks[1]["data"]["turn"] = turn
    export.write_text(json.dumps(tasks))
    mapping.write_text("turn: data.turn\n" + LS_MAPPING)
    refused(lambda: import_label_studio(export, mapping),
            "task 2 (id 18), annotation 1 (by ann@x.org): no turn index (a whole number >= 0) at data.turn "
            f"(found {found})")


@pytest.mark.parametrize("text, words", [
    (LS_MAPPING.replace("  category_b:", "  category_c:"), "map.yaml:9: labels.category_c: not a label field"),
    (LS_MAPPING.replace("Left: A", "Left: Left"),
     "map.yaml:14: labels.preference.values.Left: option 'Left': preference does not take 'Left' (it takes: A, B, "
     "Both, Neither)"),
    (LS_MAPPING.replace('"Transcription error": true', '"Transcription error": "yes"'),
     "map.yaml:17: labels.transcription_error.values.Transcription error: option 'Transcription error': "
     "transcription_error does not take 'yes' (it takes: false, true)"),
    (LS_MAPPING.replace("absent: false\n  integrity_a", "absent: Missing\n  integrity_a"),
     "map.yaml:18: labels.transcription_error.absent: transcription_error does not take 'Missing'"),
    (LS_MAPPING.replace('{"Transcription error": true}', "{yes: true}"),
     "labels.transcription_error.values: option True was read as a boolean"),
    (LS_MAPPING.replace("    control: pref\n", ""), "labels.preference.control: Field required"),
    (LS_MAPPING.replace("domain: data.domain", "annotator: data.who"), "'annotator' is a column of the label rows"),
    (LS_MAPPING.replace("item_id: data.item_id", "item_id: data..item_id"), "item_id: 'data..item_id' is not a "
                                                                              "dotted path"),
    ("item_id: id\nitem_id: id\nlabels: {}", "map.yaml:2: 'item_id' is given twice"),
    ("labels: [", "map.yaml:1: not valid YAML"),
])
def test_mapping_problems_name_the_key(tmp_path, text, words):
    path = write(tmp_path / "map.yaml", text)
    refused(lambda: load_mapping(path), words)


def test_a_json_mapping(tmp_path, ls_files):
    export, _ = ls_files
    mapping = {"item_id": "data.item_id", "annotator": "completed_by.email",
               "labels": {"category_a": {"control": "quality_a", "values": {"Good answer": "Successful",
                                                                             "Bad answer": "Not Successful"}}}}
    labels = import_label_studio(export, write(tmp_path / "map.json", json.dumps(mapping)))
    assert len(labels) == 6 and {h.category_b for h in labels} == {None}
