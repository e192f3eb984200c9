"""Rubric folders: an id is never taken twice (not from a built-in, not by two files), keys given
twice in a YAML file are refused with their line, a missing folder is an error, and one bad file
does not hide the good ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from framejudge.rubrics import RubricError, get_rubric, scan_rubrics
from framejudge.runner.judges import JudgesFileError, load_judges_file

ROOT = Path(__file__).parents[2]
MCQ = yaml.safe_load((ROOT / "framejudge/rubrics/builtin/mcq-letter.yaml").read_text())


def write_rubric(path: Path, rubric_id: str, extra: str = "") -> Path:
    path.write_text(yaml.safe_dump({**MCQ, "id": rubric_id}, sort_keys=False) + extra)
    return path


@pytest.fixture()
def folder(tmp_path) -> Path:
    d = tmp_path / "rubrics"
    d.mkdir()
    write_rubric(d / "a.yaml", "house")
    write_rubric(d / "b.yaml", "house")
    write_rubric(d / "c.yaml", "video-qa")
    write_rubric(d / "d.yaml", "twice", "id: again\n")
    (d / "e.yaml").write_text("id: [\n")
    write_rubric(d / "f.yaml", "fine")
    return d


def cli(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "framejudge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **(env or {})})


def test_scan_keeps_the_good_files_and_names_the_bad(folder):
    scan = scan_rubrics([folder])
    assert set(scan.rubrics) == {"video-qa", "mcq-letter", "fine"}
    assert scan.sources["fine"] == str(folder / "f.yaml") and scan.sources["video-qa"] == "built in"
    assert scan.rubrics["video-qa"].kind == "video_qa"  # the built-in, not c.yaml's mcq rubric
    problems = "\n".join(scan.problems)
    assert f"{folder / 'b.yaml'}: id 'house' is also the id in {folder / 'a.yaml'}" in problems
    assert f"{folder / 'c.yaml'}: id 'video-qa' is a built-in rubric's" in problems
    line = (folder / "d.yaml").read_text().splitlines().index("id: again") + 1
    assert f"{folder / 'd.yaml'}:{line}: 'id' is given twice (first on line 1)" in problems
    assert f"{folder / 'e.yaml'}:2: not valid YAML" in problems


def test_an_id_in_two_files_is_refused_by_name(folder):
    with pytest.raises(RubricError, match="(?s)no rubric with id 'house'.*also the id in"):
        get_rubric("house", [folder])
    assert get_rubric("fine", [folder]).id == "fine"


def test_rubrics_list_shows_the_good_reports_the_bad(folder):
    proc = cli("rubrics", "list", "--dir", folder)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "fine" in proc.stdout and str(folder / "f.yaml") in proc.stdout and "built in" in proc.stdout
    assert proc.stderr.count("error: ") == 4 and "e.yaml:2: not valid YAML" in proc.stderr


def test_a_clean_folder_lists_with_exit_0(tmp_path):
    write_rubric(tmp_path / "house.yaml", "house")
    proc = cli("rubrics", "list", "--dir", tmp_path)
    assert proc.returncode == 0 and "house" in proc.stdout and proc.stderr == ""


@pytest.mark.parametrize("command", [["rubrics", "list"], ["rubrics", "show", "video-qa"]])
def test_a_missing_dir_is_an_error(tmp_path, command):
    proc = cli(*command, "--dir", tmp_path / "nope")
    assert proc.returncode == 2 and f"error: --dir {tmp_path / 'nope'}: no such folder" in proc.stderr


def test_a_missing_folder_in_the_variable_is_reported(tmp_path):
    proc = cli("rubrics", "list", env={"FRAMEJUDGE_RUBRICS": str(tmp_path / "gone")})
    assert proc.returncode == 2 and f"{tmp_path / 'gone'}: no such rubric folder" in proc.stderr
    assert "video-qa" in proc.stdout


def test_a_key_given_twice_in_a_judges_file(tmp_path):
    path = tmp_path / "judges.yaml"
    path.write_text("judges:\n  - spec: reference\n    concurrency: 2\n    concurrency: 64\n")
    with pytest.raises(JudgesFileError, match=r"judges.yaml:4: 'concurrency' is given twice \(first on line 3\)"):
        load_judges_file(path)


def test_the_service_lists_the_good_rubrics_beside_a_bad_file(folder, tmp_path, monkeypatch):
    from framejudge.service.app import create_app
    from framejudge.service.settings import Settings
    from framejudge.service.store import create_key, engine_for

    monkeypatch.setenv("FRAMEJUDGE_RUBRICS", str(folder))
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", run_worker=False)
    key = create_key(engine_for(settings.database_url), ["grade"])
    client = TestClient(create_app(settings), raise_server_exceptions=False)
    r = client.get("/v1/rubrics", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200, r.text
    assert {x["id"] for x in r.json()} == {"video-qa", "mcq-letter", "fine"}
    assert json.dumps(r.json()).count("video-qa") == 1
