"""A local calibration into a server's review queue, as docs/calibration.md says: its snippet run as
written (bash, the framejudge command, curl and jq) against a real uvicorn server on loopback. The
queue's figures are the local calibration's, its units are reviewable, and the items it was given
are on its unit pages."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.service.test_review import ITEMS
from tests.service.test_review_browser import server  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="the snippet uses curl and jq")


def snippet() -> str:
    text = (ROOT / "docs" / "calibration.md").read_text(encoding="utf-8")
    section = text.split("## A local calibration in a server's review queue")[1].split("\n## ")[0]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_documented_steps_put_a_local_calibration_in_the_review_queue(server, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in server["labels"]))
    (work / "verdicts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in server["records"]))
    (work / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "framejudge"  # the installed command, as a virtual environment's
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m framejudge.cli "$@"\n')
    shim.chmod(0o755)
    steps = snippet().replace("http://127.0.0.1:8000", server["url"])
    ran = subprocess.run(["bash", "-euo", "pipefail", "-c", steps], cwd=work, capture_output=True, text=True,
                         timeout=300, check=False,
                         env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
                              "FRAMEJUDGE_KEY": server["owner"]})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    queue = json.loads((work / "queue.json").read_text())
    assert ran.stdout.strip().splitlines()[-1] == f"open {server['url']}/review/{queue['id']}"
    local = json.loads((work / "result.json").read_text())
    assert queue["result"]["fields"] == local["fields"]  # the same figures, from the same replicates and seed

    with httpx.Client(base_url=server["url"]) as browser:  # a reviewer, signed in on the form
        form = browser.get("/review/sign-in")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
        browser.post("/review/sign-in", data={"api_key": server["owner"], "csrf": token, "next": "/review"})
        listing = browser.get(f"/review/{queue['id']}")
        assert listing.status_code == 200 and "<strong>5</strong> units" in listing.text
        unit = browser.get(f"/review/{queue['id']}/unit", params={"item": "disputed"})
        assert unit.status_code == 200 and "What number is shown?" in unit.text and "It shows 7." in unit.text
    labels = httpx.get(f"{server['url']}/v1/calibrate/{queue['id']}/labels",
                       headers={"Authorization": f"Bearer {server['owner']}"})
    assert labels.status_code == 200 and len(labels.text.splitlines()) == 5


def test_items_without_a_review_request_are_refused(tmp_path):
    from typer.testing import CliRunner

    from framejudge.cli import app

    (tmp_path / "labels.jsonl").write_text('{"item_id": "a", "annotator": "h1", "category_a": "Successful"}\n')
    (tmp_path / "verdicts.jsonl").write_text("")
    (tmp_path / "items.jsonl").write_text(json.dumps(ITEMS[0]) + "\n")
    got = CliRunner().invoke(app, ["calibrate", "--human", str(tmp_path / "labels.jsonl"), "--judge",
                                   str(tmp_path / "verdicts.jsonl"), "--items", str(tmp_path / "items.jsonl")])
    assert got.exit_code == 2, got.output
    assert got.stderr.startswith("error: --items: the items are read only for --review-request"), got.stderr
