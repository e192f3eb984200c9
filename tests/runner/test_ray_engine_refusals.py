"""`--engine ray` and `grade(engine="ray")` refused with a reason: without Ray installed (hidden from
a fresh interpreter, so this runs with or without the extra), and options that need the engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HIDE_RAY = "import sys; sys.modules['ray'] = None; "  # `import ray` then fails as if it were not installed


def _items(tmp_path: Path) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"id": "a", "turns": [{"question": "q", "golden": "g", "response_a": "r"}]}) + "\n")
    return path


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_the_command_line_without_ray_says_how_to_install_it(tmp_path):
    cli = HIDE_RAY + "from framejudge.cli import main; sys.argv[0] = 'framejudge'; main()"
    proc = _python(cli, "grade", str(_items(tmp_path)), "--out", str(tmp_path / "v.jsonl"), "--engine", "ray")
    assert proc.returncode == 2
    assert "error:" in proc.stderr and "pip install '.[ray]'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "v.jsonl").exists()


def test_the_python_api_without_ray_raises_ray_unavailable(tmp_path):
    code = HIDE_RAY + (
        "import framejudge\n"
        "from framejudge.runner.ray_engine import RayUnavailable\n"
        "try:\n"
        f"    framejudge.grade({str(_items(tmp_path))!r}, engine='ray', out={str(tmp_path / 'v.jsonl')!r})\n"
        "except RayUnavailable as exc:\n"
        "    print(exc.code, exc)\n")
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ray_unavailable ") and "pip install '.[ray]'" in proc.stdout
    assert not (tmp_path / "v.jsonl").exists()


def test_options_of_the_ray_engine_are_refused_without_it(tmp_path):
    items = str(_items(tmp_path))
    for option in (["--address", "auto"], ["--grading-actors", "4"]):
        proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", items, "--out",
                               str(tmp_path / "v.jsonl"), *option], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 2 and f"error: {option[0]} is for --engine ray" in proc.stderr, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", items, "--engine", "ray", "--batch"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and "error: --batch" in proc.stderr, proc.stderr
    code = "import framejudge\ntry:\n    framejudge.grade(%r, engine='spark')\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n"
    proc = _python(code % items)
    assert proc.stdout.strip() == "InvalidOptions engine 'spark': local or ray"
