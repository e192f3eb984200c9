"""Every CLI option that names an output file: checked before the work starts (a folder, an input,
a path under a file, a device that cannot be read back), and a write that fails after the work
(a full disk, a file size limit) is an error line and exit 2 that keeps what was already written."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video

EXAMPLES = Path(__file__).parents[1] / "examples" / "items.jsonl"
FULL = Path("/dev/full")
needs_dev_full = pytest.mark.skipif(not FULL.exists(), reason="no /dev/full on this system")


def cli(*args: object, limit_bytes: int | None = None, timeout: float = 120,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:  # writes past this size fail with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-m", "framejudge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit if limit_bytes else None, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


def refused(proc: subprocess.CompletedProcess[str], words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and words in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("video") / "c.mp4"
    write_video(path, countdown, cfr_times(2, 30), gop=30)
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory, bundled_examples) -> dict[str, Path]:
    """A graded run and labels for it, for calibrate."""
    d = tmp_path_factory.mktemp("run")
    verdicts = d / "v.jsonl"
    assert cli("grade", bundled_examples, "--out", verdicts).returncode == 0
    labels = d / "labels.jsonl"
    ids = [json.loads(line)["id"] for line in EXAMPLES.read_text().splitlines()]
    labels.write_text("".join(json.dumps({"item_id": i, "annotator": a, "category_a": "Successful"}) + "\n"
                              for i in ids for a in ("h1", "h2")))
    return {"verdicts": verdicts, "labels": labels}


def many_items(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"i{k}", "turns": [{
        "question": "How many people?", "golden": f"{k} people.", "response_a": f"There are {k} people.",
        "response_b": "I cannot answer that."}]}) + "\n" for k in range(n)))
    return path


def test_grade_refuses_bad_verdicts_paths_before_grading(tmp_path):
    refused(cli("grade", EXAMPLES, "--out", tmp_path), "is a folder, not a file for the verdicts")
    refused(cli("grade", EXAMPLES, "--out", EXAMPLES), "would overwrite an input")
    refused(cli("grade", EXAMPLES, "--out", EXAMPLES / "v.jsonl"), f"{EXAMPLES} is not a folder")
    refused(cli("grade", EXAMPLES, "--out", tmp_path / "v.jsonl", "--summary-json", tmp_path),
            "is a folder, not a file for the summary")
    refused(cli("grade", EXAMPLES, "--out", tmp_path / "v.jsonl", "--summary-json", tmp_path / "v.jsonl"),
            "would overwrite an input")
    assert not (tmp_path / "v.jsonl").exists()


@needs_dev_full
def test_grade_into_a_device_is_refused_without_reading_it(tmp_path):
    refused(cli("grade", EXAMPLES, "--out", FULL, timeout=60), "/dev/full: not a regular file")


@needs_dev_full
def test_a_summary_that_cannot_be_written_keeps_the_verdicts(tmp_path, bundled_examples):
    out = tmp_path / "v.jsonl"
    proc = cli("grade", bundled_examples, "--out", out, "--summary-json", FULL)
    refused(proc, "cannot write the summary to /dev/full: No space left on device")
    assert json.loads(proc.stdout)["turns_graded"] == 13  # the summary still reaches stdout
    assert len(out.read_text().splitlines()) == 13


def test_summary_json_dash_is_stdout_once(tmp_path, bundled_examples):
    proc = cli("grade", bundled_examples, "--out", tmp_path / "v.jsonl", "--summary-json", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["turns_graded"] == 13 and not (tmp_path / "-").exists()


def test_a_disk_that_fills_while_grading_keeps_what_was_written_and_resumes(tmp_path):
    items, out = many_items(tmp_path / "items.jsonl", 60), tmp_path / "v.jsonl"
    refused(cli("grade", items, "--out", out, "--concurrency", "1", "--no-cache", limit_bytes=20_000),
            f"cannot write the verdicts to {out}: File too large (the verdicts written so far are kept)")
    kept = len(out.read_text().splitlines())
    assert kept > 1
    proc = cli("grade", items, "--out", out, "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert f"{61 - kept} turn(s) to grade" in proc.stderr or f"{60 - kept} turn(s) to grade" in proc.stderr
    assert len({json.loads(line)["item_id"] for line in out.read_text().splitlines()}) == 60


@needs_dev_full
def test_stdout_on_a_full_disk_is_an_error_line(tmp_path):
    with FULL.open("w") as full:
        proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "rubrics", "list"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    refused(proc, "cannot write the output: No space left on device")


def test_frames_outputs_are_checked_before_decoding(tmp_path, video):
    refused(cli("frames", video, "--contact-sheet", tmp_path), "is a folder, not a file for the contact sheet")
    refused(cli("frames", video, "--contact-sheet", tmp_path / "sheet.xyz"),
            "an image file name ends in .jpg, .png or .webp (not '.xyz')")
    refused(cli("frames", video, "--contact-sheet", tmp_path / "sheet"), "an image file name ends in")
    refused(cli("frames", video, "--contact-sheet", video), "would overwrite an input")
    refused(cli("frames", video, "--out", video), f"{video} is not a folder")
    assert cli("frames", video, "-n", "2", "--contact-sheet", tmp_path / "new" / "s.png").returncode == 0
    assert (tmp_path / "new" / "s.png").stat().st_size > 0


def test_frames_that_fail_to_write_are_an_error_line(tmp_path, video):
    refused(cli("frames", video, "-n", "4", "--no-cache", "--out", tmp_path / "f", limit_bytes=1000),
            f"cannot write the frames to {tmp_path / 'f'}: File too large")


def test_examples_make_into_a_file(tmp_path):
    refused(cli("examples", "make", EXAMPLES), f"{EXAMPLES} is not a folder")


def test_mcq_details_paths(tmp_path):
    pred, gold = tmp_path / "p.jsonl", tmp_path / "g.jsonl"
    pred.write_text('{"video_path": "a", "mcq_answer": "B"}\n')
    gold.write_text('{"video_path": "a", "mcq_answer": "B", "mcq_options": ["cat", "dog"]}\n')
    refused(cli("mcq", "score", pred, gold, "--details", tmp_path), "is a folder, not a file for the details")
    refused(cli("mcq", "score", pred, gold, "--details", gold), "would overwrite an input")
    proc = cli("mcq", "score", pred, gold, "--details", tmp_path / "d.jsonl", limit_bytes=10)
    refused(proc, "cannot write the details")
    assert json.loads(proc.stdout)["accuracy"] == 1.0  # the score itself is printed first


def test_calibrate_outputs_are_checked_before_the_bootstrap(tmp_path, run):
    base = ["calibrate", "--human", run["labels"], "--judge", run["verdicts"], "--replicates", "20"]
    refused(cli(*base, "--out", tmp_path), "is a folder, not a file for the result")
    refused(cli(*base, "--report", run["labels"]), "would overwrite an input")
    refused(cli(*base, "--out", tmp_path / "r", "--report", tmp_path / "r"), "given for both the result and the report")
    refused(cli(*base, "--disagreements", run["verdicts"] / "x"), "is not a folder")


def test_calibrate_keeps_the_outputs_that_could_be_written(tmp_path, run):
    base = ["calibrate", "--human", run["labels"], "--judge", run["verdicts"], "--replicates", "20"]
    result, report = tmp_path / "result.json", tmp_path / "report.html"
    proc = cli(*base, "--out", result, "--report", report, limit_bytes=50_000)  # the result is about 30 kB, the report 70
    refused(proc, f"cannot write the report to {report}: File too large")
    assert json.loads(result.read_text())["fields"]  # written before the report failed
    assert "judge vs humans" in proc.stdout  # and the tables are printed


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero on this system")
def test_input_paths_that_are_folders_or_devices(tmp_path, run):
    zero = Path("/dev/zero")  # read to its end, it never ends
    refused(cli("grade", tmp_path, "--out", tmp_path / "v.jsonl"), f"{tmp_path}: is a folder, not a file")
    refused(cli("grade", zero, "--out", tmp_path / "v.jsonl", timeout=60), "/dev/zero: is a device, not a file")
    refused(cli("grade", EXAMPLES, "--out", tmp_path / "v.jsonl", "--judges", zero, timeout=60), "is a device")
    refused(cli("calibrate", "--human", zero, "--judge", run["verdicts"], timeout=60), "is a device")
    for verdicts in (zero, tmp_path):
        refused(cli("calibrate", "--human", run["labels"], "--judge", verdicts, timeout=60),
                f"{verdicts}: not a regular file")
    refused(cli("calibrate", "--human", run["labels"], "--judge", run["verdicts"], "--compare", tmp_path),
            f"{tmp_path}: not a regular file")


@pytest.mark.parametrize("kind", ["folder", "input"])
def test_regrade_checks_where_the_superseded_verdicts_go_before_grading(tmp_path, kind):
    assert cli("examples", "make", tmp_path / "videos").returncode == 0
    graded = tmp_path / "items.jsonl"
    graded.write_text(EXAMPLES.read_text())
    out = tmp_path / "v.jsonl"
    assert cli("grade", graded, "--out", out).returncode == 0
    before = out.read_bytes()
    edited = EXAMPLES.read_text().replace("The last number shown was 1.", "The last number shown was 2.")
    if kind == "folder":
        items = tmp_path / "edited.jsonl"
        (tmp_path / "v.superseded.jsonl").mkdir()
        words = "v.superseded.jsonl: is a folder, not a file for the superseded verdicts"
    else:  # the items file is where the superseded verdicts would be appended
        items = tmp_path / "v.superseded.jsonl"
        words = "v.superseded.jsonl: the superseded verdicts would overwrite an input of this command"
    items.write_text(edited)
    refused(cli("grade", items, "--out", out, "--regrade"), words)
    assert out.read_bytes() == before
    if kind == "input":
        assert items.read_text() == edited


@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_output_folders_behind_a_broken_symbolic_link(tmp_path, video, kind):
    link = tmp_path / "link"
    if kind == "loop":
        (tmp_path / "other").symlink_to(link)
        link.symlink_to(tmp_path / "other")
    else:
        link.symlink_to(tmp_path / "missing" / "target")
    words = f"{link} is a symbolic link that leads nowhere"
    refused(cli("examples", "make", link), words)
    refused(cli("frames", video, "--out", link / "frames"), words)
    refused(cli("grade", EXAMPLES, "--out", link / "v.jsonl"), words)


def test_a_dash_names_no_output_file(tmp_path, run):
    refused(cli("grade", EXAMPLES, "--out", "-", cwd=tmp_path), "-: name a file for the verdicts (here - is not stdout)")
    pred, gold = tmp_path / "p.jsonl", tmp_path / "g.jsonl"
    pred.write_text('{"video_path": "a", "mcq_answer": "A"}\n')
    gold.write_text('{"video_path": "a", "mcq_answer": "A", "mcq_options": ["x", "y"]}\n')
    refused(cli("mcq", "score", pred, gold, "--details", "-", cwd=tmp_path), "-: name a file for the details")
    refused(cli("calibrate", "--human", run["labels"], "--judge", run["verdicts"], "--report", "-", cwd=tmp_path),
            "-: name a file for the report")
    assert not (tmp_path / "-").exists()


def test_tables_written_to_a_pipe_keep_every_cell_whole(tmp_path):
    """Not a terminal and no COLUMNS: Rich would fit tables to 80 columns, cutting cells
    (`categ…`) and wrapping them mid-word; a pipe gets every cell whole."""
    from framejudge.rubrics import get_rubric
    from tests.calibration.simulated import simulate, write_files

    _, labels, verdicts = simulate(60, 3)
    human, judge = write_files(tmp_path, labels, verdicts)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    run = [sys.executable, "-m", "framejudge.cli"]
    table = subprocess.run([*run, "calibrate", "--human", str(human), "--judge", str(judge), "--replicates", "20"],
                           capture_output=True, text=True, timeout=300, env=env)
    assert table.returncode == 0, table.stderr
    assert "…" not in table.stdout
    for words in ("category_a", "preference_decided", "human alpha (ceiling)"):
        assert words in table.stdout, table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) > 80
    rubrics = subprocess.run([*run, "rubrics", "list"], capture_output=True, text=True, timeout=120, env=env)
    assert rubrics.returncode == 0 and "…" not in rubrics.stdout
    rubric = get_rubric("video-qa")
    assert rubric.content_hash in rubrics.stdout and rubric.title in rubrics.stdout
    # COLUMNS, where given, is still the width
    narrow = subprocess.run([*run, "rubrics", "list"], capture_output=True, text=True, timeout=120,
                            env={**env, "COLUMNS": "60"})
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 60
