"""Every command that grades tells the truth in its exit status, as `grade` does: 0 every turn
graded, 1 some could not be (each kind of error named on stderr with how many and its first message,
and what was graded kept), 2 refused before grading. `leaderboard` and `compare` (battles) and `align`
(the gradings it runs itself), in process."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from framejudge.cli import app
from tests.rubrics.test_align import guideline_files

TURNS = [("What does the sign say?", "STOP", "STOP.", "It says GO."),
         ("How many people?", "Two.", "Two people.", "Three people.")]


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def model_files(tmp_path, missing_video: bool) -> tuple:
    """Two models' answers (response_a) to the same items; the first item's video is missing where
    `missing_video` (its battles are bad_input judge errors)."""
    files = []
    for name, pick in (("new", 2), ("old", 3)):
        rows = [{"id": f"i{k}", "turns": [{"question": t[0], "golden": t[1], "response_a": t[pick]}]}
                for k, t in enumerate(TURNS)]
        if missing_video:
            rows[0]["video"] = "nowhere.mp4"
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        files.append(path)
    return tuple(files)


def test_a_leaderboard_with_battles_that_failed_exits_1_naming_each_kind(tmp_path):
    new, old = model_files(tmp_path, missing_video=True)
    battles = tmp_path / "battles.jsonl"
    done = run("leaderboard", "--model", f"new={new}", "--model", f"old={old}", "--battles", battles,
               "--replicates", 20, "--out", tmp_path / "board.json")
    assert done.exit_code == 1, done.output
    assert f"error: 1 turn(s) could not be graded (judge error records in {battles}, left out of the board" \
           in done.output
    assert "bad_input: 1 turn(s), the first: item " in done.output and "nowhere.mp4" in done.output
    board = json.loads((tmp_path / "board.json").read_text())  # what was graded is kept, and the board written
    assert board["battles"] == 2 and board["errors"] == 1
    assert len(battles.read_text().splitlines()) == 2


def test_a_leaderboard_whose_battles_all_succeeded_exits_0_and_one_refused_exits_2(tmp_path):
    new, old = model_files(tmp_path, missing_video=False)
    done = run("leaderboard", "--model", f"new={new}", "--model", f"old={old}", "--battles", tmp_path / "b.jsonl",
               "--replicates", 20)
    assert done.exit_code == 0, done.output
    refused = run("leaderboard", "--model", f"new={new}", "--model", f"old={old}", "--battles", tmp_path / "c.jsonl",
                  "--judge", "litellm:openai/gpt-4o-mini", "--judges", tmp_path / "none.yaml")
    assert refused.exit_code == 2 and "error:" in refused.output
    # and a failed battle, graded again into the same file, still fails: the exit status says so each time
    new, old = model_files(tmp_path, missing_video=True)
    first = run("leaderboard", "--model", f"new={new}", "--model", f"old={old}", "--battles", tmp_path / "d.jsonl",
                "--replicates", 20)
    again = run("leaderboard", "--model", f"new={new}", "--model", f"old={old}", "--battles", tmp_path / "d.jsonl",
                "--replicates", 20)
    assert (first.exit_code, again.exit_code) == (1, 1), again.output


def test_compare_with_turns_that_failed_exits_1_naming_each_kind(tmp_path):
    new, old = model_files(tmp_path, missing_video=True)
    battles = tmp_path / "compare.jsonl"
    done = run("compare", new, old, "--battles", battles)
    assert done.exit_code == 1, done.output
    assert f"error: 1 turn(s) could not be graded (judge error records in {battles}, left out of the comparison" \
           in done.output
    assert "bad_input: 1 turn(s), the first: item " in done.output


def test_align_with_turns_it_could_not_grade_exits_1_and_still_writes_the_rubric(shared_dir, tmp_path):
    items, labels = guideline_files(shared_dir, tmp_path)
    rows = [json.loads(line) for line in items.read_text().splitlines()]
    for row in rows[:4]:
        row["video"] = "nowhere.mp4"
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rubric, report = tmp_path / "aligned.yaml", tmp_path / "report.json"
    done = run("align", "--labels", labels, "--items", items, "--out", rubric, "--report", report,
               "--replicates", 20)
    assert done.exit_code == 1, done.output
    assert "turn(s) could not be graded (left out of the corrections and the comparison" in done.output
    assert "bad_input: " in done.output and "nowhere.mp4" in done.output
    assert rubric.exists()
    result = json.loads(report.read_text())
    assert result["judge_errors"]["bad_input"] >= 4 and "nowhere.mp4" in result["judge_error_examples"]["bad_input"]
