"""The suite's expensive shared fixtures (the Ray cluster, the hostile-video corpus, the adjudication
fixture) are built once per run because their tests share an xdist_group, which `./run test` runs with
--dist loadgroup. Some pytest and pytest-xdist releases do not group (pytest 9.2 with pytest-xdist 3.8):
the suite then still passes, only slower, so this checks the grouping itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GROUPED = '''
import os, pytest
pytestmark = pytest.mark.xdist_group("shared")

@pytest.mark.parametrize("i", range(6))
def test_record_the_worker(i):
    with open(os.path.join(os.path.dirname(__file__), "workers", str(i)), "w") as out:
        out.write(os.environ["PYTEST_XDIST_WORKER"])
'''


def test_tests_of_one_xdist_group_run_in_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "workers").mkdir()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadgroup", "test_grouped.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    workers = {p.read_text() for p in (tmp_path / "workers").iterdir()}
    assert len(list((tmp_path / "workers").iterdir())) == 6
    assert len(workers) == 1, f"one xdist_group ran on {sorted(workers)}: --dist loadgroup does not group here"
