"""A rerun into an existing verdicts file keeps only what was graded the same way; the summary
is of this run's items; retried failures do not pile up; the call estimate is per turn."""

from __future__ import annotations

from framejudge.judge.reference import VERSION as REFERENCE_VERSION

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.judge import Grader, ReferenceJudge, load_items, read_records
from framejudge.rubrics import RubricError, get_rubric
from framejudge.runner import run_batch
from framejudge.runner.local import planned_calls
from framejudge.runner.resume import ResumeConflict, plan_resume, superseded_path
from framejudge.schema import GradeOptions, JudgeError, SamplerParams, Verdict

RUBRIC = get_rubric("video-qa")
EXAMPLES = Path(__file__).parents[2] / "examples" / "items.jsonl"


class FramesReference(ReferenceJudge):
    """The reference judge's decisions under another identity, as a judge that is shown frames
    (for items without a video no frame is decoded)."""

    model_id = "reference-with-frames"
    needs_frames = True


def write_items(path: Path, n: int, edit: int | None = None) -> Path:
    with path.open("w") as f:
        for i in range(n):
            a = f"There are {i % 5} people." if i != edit else "There are 9 people."
            f.write(json.dumps({"id": f"item-{i}", "turns": [{
                "question": "How many people are on the bench?", "golden": f"{i % 5} people.",
                "response_a": a, "response_b": f"There are {(i + 1) % 5} people."}]}) + "\n")
    return path


def other_rubric(tmp_path: Path) -> Path:
    """video-qa with one word of its guidance changed: another rubric of the same id and version."""
    text = (Path(__file__).parents[2] / "framejudge/rubrics/builtin/video-qa.yaml").read_text()
    path = tmp_path / "video-qa-edited.yaml"
    path.write_text(text.replace("id: video-qa", "id: video-qa-edited", 1))
    return path


def grade(grader: Grader, items_path: Path, out: Path, regrade: bool = False):
    items = load_items(items_path)
    plan = plan_resume(grader, items, out, regrade=regrade)
    return asyncio.run(run_batch(grader, items, out, plan=plan))


def test_another_rubric_judge_or_edited_turn_is_refused_and_named(tmp_path):
    items = write_items(tmp_path / "items.jsonl", 6)
    out = tmp_path / "v.jsonl"
    grade(Grader(ReferenceJudge(), RUBRIC), items, out)
    before = out.read_bytes()

    with pytest.raises(ResumeConflict) as rubric_change:
        grade(Grader(ReferenceJudge(), get_rubric(str(other_rubric(tmp_path)))), items, out)
    assert "rubric: video-qa@" in str(rubric_change.value) and "--regrade" in str(rubric_change.value)
    assert "6 turn(s)" in str(rubric_change.value)

    with pytest.raises(ResumeConflict) as judge_change:
        grade(Grader(FramesReference(), RUBRIC), items, out)
    assert f"judge: reference {REFERENCE_VERSION} in the file, reference reference-with-frames now" in str(judge_change.value)

    edited = write_items(tmp_path / "edited.jsonl", 6, edit=2)
    with pytest.raises(ResumeConflict) as content_change:
        grade(Grader(ReferenceJudge(), RUBRIC), edited, out)
    message = str(content_change.value)
    assert "content:" in message and "item-2 turn 0" in message and "(1 turn(s))" in message
    assert out.read_bytes() == before  # a refusal changes nothing


def test_options_that_change_a_verdict_are_compared(tmp_path):
    items = write_items(tmp_path / "items.jsonl", 3)
    out = tmp_path / "v.jsonl"
    grade(Grader(FramesReference(), RUBRIC, GradeOptions(sampler=SamplerParams(n=8))), items, out)
    with pytest.raises(ResumeConflict, match=r"frames: n=8 in the file, n=4 now"):
        grade(Grader(FramesReference(), RUBRIC, GradeOptions(sampler=SamplerParams(n=4))), items, out)
    with pytest.raises(ResumeConflict, match=r"swap: False in the file, True now"):
        grade(Grader(FramesReference(), RUBRIC, GradeOptions(sampler=SamplerParams(n=8), swap=True)), items, out)
    # what the judge does not use is no difference: the reference judge is shown no frames
    out2 = tmp_path / "v2.jsonl"
    grade(Grader(ReferenceJudge(), RUBRIC, GradeOptions(sampler=SamplerParams(n=8))), items, out2)
    again = grade(Grader(ReferenceJudge(), RUBRIC, GradeOptions(sampler=SamplerParams(n=2), samples=5)), items, out2)
    assert again.turns_graded == 3 and len(read_records(out2)) == 3


def test_regrade_moves_the_old_records_apart_and_grades_the_changed_turns(tmp_path):
    items = write_items(tmp_path / "items.jsonl", 6)
    out = tmp_path / "v.jsonl"
    grade(Grader(ReferenceJudge(), RUBRIC), items, out)
    old = {r.item_id: r for r in read_records(out)}
    edited = write_items(tmp_path / "edited.jsonl", 6, edit=2)
    grader = Grader(ReferenceJudge(), RUBRIC)
    plan = plan_resume(grader, load_items(edited), out, regrade=True)
    assert plan.turns == 1 and plan.kept == 5 and planned_calls(grader, plan.work) == 1
    summary = asyncio.run(run_batch(grader, load_items(edited), out, plan=plan))
    records = read_records(out)
    assert len(records) == 6 and summary.turns_graded == 6  # one standing record per turn
    new = {r.item_id: r for r in records}
    assert new["item-2"].response_a.category.value == "Not Successful"  # 9 is not 2
    assert old["item-2"].response_a.category.value == "Successful"
    moved = read_records(superseded_path(out))
    assert [r.item_id for r in moved] == ["item-2"] and moved[0] == old["item-2"]
    assert {k: v for k, v in new.items() if k != "item-2"} == {k: v for k, v in old.items() if k != "item-2"}
    # and now it resumes cleanly
    assert plan_resume(grader, load_items(edited), out).turns == 0


def test_records_without_options_are_not_taken_as_done(tmp_path):
    items = write_items(tmp_path / "items.jsonl", 2)
    out = tmp_path / "v.jsonl"
    grade(Grader(ReferenceJudge(), RUBRIC), items, out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    for row in lines:  # as an older version wrote them
        row["provenance"].pop("options")
        row["provenance"].pop("turn_hash")
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(ResumeConflict, match="did not record its options"):
        grade(Grader(ReferenceJudge(), RUBRIC), items, out)


def test_summary_is_of_this_runs_items_only(tmp_path):
    out = tmp_path / "v.jsonl"
    grade(Grader(ReferenceJudge(), RUBRIC), write_items(tmp_path / "all.jsonl", 11), out)
    small = tmp_path / "three.jsonl"
    small.write_text("".join(write_items(tmp_path / "x.jsonl", 3).read_text().splitlines(True)))
    summary = grade(Grader(ReferenceJudge(), RUBRIC), small, out)
    assert summary.items == 3 and summary.turns_graded == 3
    assert sum(summary.categories_a.values()) == 3 and sum(summary.preferences.values()) == 3
    assert len(read_records(out)) == 11  # the other run's verdicts stay where they were


def test_retried_failures_do_not_pile_up(tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "v", "video": "missing.mp4", "turns": [
        {"question": "What is shown?", "response_a": "A dog."}]}) + "\n")
    out = tmp_path / "v.jsonl"
    grader = Grader(FramesReference(), RUBRIC, media_root=tmp_path)
    for _ in range(3):
        summary = grade(grader, items, out)
    records = read_records(out)
    assert len(records) == 1 and isinstance(records[0], JudgeError)  # one line, not three
    assert summary.errors == {"bad_input": 1}
    # the video appears: the verdict replaces the failure
    write_video(tmp_path / "missing.mp4", countdown, cfr_times(2, 10))
    grade(grader, items, out)
    records = read_records(out)
    assert len(records) == 1 and isinstance(records[0], Verdict)


def test_estimate_counts_swaps_only_for_pairs_and_no_calls_for_rules(tmp_path):
    path = tmp_path / "items.jsonl"
    rows = [
        {"id": "single", "turns": [{"question": "What is it?", "response_a": "A dog."}]},
        {"id": "pair", "turns": [{"question": "What is it?", "response_a": "A dog.", "response_b": "A cat."}]},
        {"id": "errors", "turns": [{"question": "What is it?", "response_a": "I cannot answer that.",
                                    "response_b": "I cannot answer that."}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = load_items(path)
    grader = Grader(ReferenceJudge(), RUBRIC, GradeOptions(swap=True))
    plan = plan_resume(grader, items, tmp_path / "v.jsonl")
    assert planned_calls(grader, plan.work) == 1 + 2 + 0


def test_mcq_rubric_is_refused_before_anything_is_graded(tmp_path):
    with pytest.raises(RubricError, match="is a mcq rubric"):
        Grader(ReferenceJudge(), get_rubric("mcq-letter"))
    out = tmp_path / "v.jsonl"
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(EXAMPLES), "--out", str(out),
                           "--rubric", "mcq-letter"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: rubric 'mcq-letter' is a mcq rubric")
    assert "Traceback" not in proc.stderr and not out.exists()


def test_grade_command_refuses_a_changed_rubric_and_regrades_on_request(tmp_path):
    items = tmp_path / "items.jsonl"
    shutil.copy(EXAMPLES, items)
    subprocess.run([sys.executable, "-m", "framejudge.cli", "examples", "make", str(tmp_path / "videos")],
                   check=True, capture_output=True, timeout=120)
    out = tmp_path / "v.jsonl"
    cmd = [sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out)]
    assert subprocess.run(cmd, capture_output=True, timeout=120).returncode == 0
    first = read_records(out)
    changed = [*cmd, "--rubric", str(other_rubric(tmp_path))]
    proc = subprocess.run(changed, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "error:" in proc.stderr and "graded differently" in proc.stderr
    assert "rubric: video-qa@" in proc.stderr and "--regrade" in proc.stderr
    proc = subprocess.run([*changed, "--regrade"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "13 verdict(s) graded differently move to" in proc.stderr
    assert json.loads(proc.stdout)["turns_graded"] == 13
    assert {r.provenance.rubric_id for r in read_records(out)} == {"video-qa-edited"}
    assert all(isinstance(r, Verdict) for r in read_records(out))
    assert read_records(superseded_path(out)) == first
