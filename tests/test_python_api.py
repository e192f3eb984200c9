"""The core job from Python: grade, then calibrate, with the CLI's options and errors; the docs'
example runs as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import framejudge
from framejudge import FramejudgeError, GradeOptions, Item, Verdict, calibrate, grade

ROOT = Path(__file__).parents[1]

ITEMS = [
    {"id": "cars", "turns": [{"question": "What colour is the car?", "golden": "The car is red.",
                              "response_a": "The car is red.", "response_b": "It is blue."}]},
    {"id": "count", "turns": [{"question": "How many dogs are there?", "golden": "There are three dogs.",
                               "response_a": "Three dogs.", "response_b": "There are three dogs."}]},
    {"id": "sign", "turns": [{"question": "What does the sign say?", "golden": "STOP",
                              "response_a": "It says YIELD.", "response_b": "The sign says STOP."}]},
]


def _labels() -> list[dict]:
    rows = []
    for annotator, flip in (("ann1", False), ("ann2", True)):
        rows += [
            {"item_id": "cars", "turn": 0, "annotator": annotator, "category_a": "Successful",
             "category_b": "Not Successful", "preference": "A"},
            {"item_id": "count", "turn": 0, "annotator": annotator, "category_a": "Successful",
             "category_b": "Successful", "preference": "Both"},
            {"item_id": "sign", "turn": 0, "annotator": annotator,
             "category_a": "Missing" if flip else "Not Successful", "category_b": "Successful", "preference": "B"},
        ]
    return rows


def _write(folder: Path) -> None:
    (folder / "judges.yaml").write_text("judges:\n  - spec: litellm:openai/a\n    api_base: http://127.0.0.1:9/v1\n")
    (folder / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (folder / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _labels()))


def test_grade_then_calibrate(tmp_path):
    _write(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    records = grade(tmp_path / "items.jsonl", out=out, options={"cache": False})
    assert [(r.item_id, r.turn) for r in records] == [("cars", 0), ("count", 0), ("sign", 0)]
    assert all(isinstance(r, Verdict) for r in records)
    assert records[0].response_a.category.value == "Successful" and records[0].preference.value == "A"
    assert len(out.read_text().splitlines()) == 3
    assert grade(tmp_path / "items.jsonl", out=out, options={"cache": False}) == records  # nothing regraded
    assert len(out.read_text().splitlines()) == 3
    result = calibrate(tmp_path / "labels.jsonl", out, replicates=50)
    fields = {f.field: f for f in result.fields}
    assert fields["category_a"].units == 3 and fields["preference"].judge_percent.value == 1.0
    assert calibrate(tmp_path / "labels.jsonl", records, replicates=50).fields[0].units == 3  # records as given
    # labels and records as the dicts of their files' lines, as they are given to the calls: the same result
    as_dicts = calibrate(_labels(), [json.loads(line) for line in out.read_text().splitlines()], replicates=50)
    assert as_dicts.model_dump() == result.model_dump()


def test_grade_takes_items_and_dicts_without_a_file(tmp_path):
    records = grade([Item.model_validate(ITEMS[0]), ITEMS[1]], options=GradeOptions(cache=False))
    assert [r.item_id for r in records] == ["cars", "count"]


def test_a_missing_video_is_a_judge_error_record_not_an_exception(tmp_path):
    item = {"id": "v", "video": "nowhere.mp4", "turns": [{"question": "What does the sign on screen say?",
                                                          "golden": "STOP", "response_a": "STOP."}]}
    graded = grade([item, ITEMS[0]], media_root=tmp_path, options={"cache": False})
    record = graded[0]
    assert record.record == "judge_error" and "not found" in record.message
    # the counts the CLI prints, on the result: one turn failed, with its kind and first message
    assert graded.failed == 1 and graded.summary.turns_graded == 1 and graded.summary.items == 2
    assert graded.summary.errors == {"bad_input": 1}
    assert graded.summary.error_examples["bad_input"].startswith("item v turn 0: ") and "not found" in \
        graded.summary.error_examples["bad_input"]


@pytest.mark.parametrize("call, kind, code, words", [
    (lambda p: grade(p / "nope.jsonl"), "ItemsError", "invalid_items", "nope.jsonl"),
    (lambda p: grade(ITEMS, judge="nope:x"), "JudgeSpecError", "judge_unavailable", "unknown judge 'nope:x'"),
    (lambda p: grade(ITEMS, options={"samples": 0}), "InvalidOptions", "invalid_options", "samples"),
    (lambda p: grade(ITEMS, options={"samples": 3}), "InvalidOptions", "invalid_options", "deterministic"),
    (lambda p: grade(ITEMS, options={"video_input": "clip"}), "InvalidOptions", "invalid_options",
     "options.video_input clip: the reference judge sends frames only"),
    (lambda p: grade([{"id": "x"}]), "ItemsError", "invalid_items", "items[0]"),
    (lambda p: grade(ITEMS, batch=True, engine="ray", out=p / "v.jsonl"), "InvalidOptions", "invalid_options",
     "runs on the local engine"),
    (lambda p: grade(ITEMS, engine="spark"), "InvalidOptions", "invalid_options", "engine 'spark'"),
    (lambda p: calibrate(p / "labels.jsonl", []), "LabelsError", "invalid_labels", "none of the"),
    (lambda p: calibrate([{"item_id": "cars", "turn": 0}], []), "LabelsError", "invalid_labels", "labels[0]: "),
    (lambda p: calibrate(_labels() + _labels()[:1], []), "LabelsError", "invalid_labels",
     "labels[6]: ann1 labelled item cars turn 0 twice"),
    (lambda p: calibrate(_labels(), [{"item_id": "cars"}]), "ItemsError", "invalid_items", "verdicts[0]: not a verdict"),
    (lambda p: calibrate(_labels(), ["cars"]), "ItemsError", "invalid_items", "verdicts[0]: a Verdict, a JudgeError"),
    (lambda p: grade(ITEMS, judge="litellm:openai/b", judges_file=p / "judges.yaml"), "JudgeSpecError",
     "judge_unavailable", "'litellm:openai/b' is not in the judges file (it has: litellm:openai/a)"),
])
def test_bad_input_is_a_framejudge_error_with_its_code(tmp_path, call, kind, code, words):
    _write(tmp_path)
    with pytest.raises(FramejudgeError) as caught:
        call(tmp_path)
    assert type(caught.value).__name__ == kind and caught.value.code == code and words in str(caught.value)


def test_grade_inside_a_running_event_loop_names_agrade(tmp_path):
    async def in_a_loop() -> list:
        with pytest.raises(FramejudgeError) as caught:
            grade(ITEMS[:1], options={"cache": False})
        assert caught.value.code == "invalid_options" and "await framejudge.agrade(...)" in str(caught.value)
        return await framejudge.agrade(ITEMS[:1], options={"cache": False})  # what the message says works

    import asyncio

    [record] = asyncio.run(in_a_loop())
    assert isinstance(record, Verdict) and record.item_id == "cars"


def test_importing_the_package_loads_nothing_heavy():
    code = ("import sys, framejudge; print(sorted(m for m in sys.modules if m.startswith('framejudge.')));"
            "print(all(name in dir(framejudge) for name in framejudge.__all__))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.splitlines() == ["['framejudge.errors']", "True"], proc.stderr
    assert framejudge.grade is grade and framejudge.__version__


def test_the_docs_examples_run_as_written(tmp_path):
    page = (ROOT / "docs" / "python.md").read_text()
    example, progress = re.findall(r"```python\n(.*?)```", page, re.S)
    _write(tmp_path)
    proc = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["cars 0 Successful A", "count 0 Successful Both"] and lines[2].startswith("sign 0 ")
    assert any(line.startswith("category_a: judge agrees with the human majority on ") for line in lines)
    # the progress example: the callback's line, and the log's last line on stderr
    proc = subprocess.run([sys.executable, "-c", progress], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["graded 3 of 3 turn(s), 0 error(s)"]
    assert proc.stderr.splitlines()[-1].startswith("framejudge.progress: done: 3/3 turn(s) (100%), "), proc.stderr
