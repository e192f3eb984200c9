"""The schema is the ground floor: importing it loads pydantic and the standard library, of framejudge
only the table of judge backends (which a judges file's specs are checked against, and which imports
nothing else of framejudge), and none of the heavy libraries; and every name the single schema module
offered is still importable from `framejudge.schema`. The rules a judgement is checked against come from the rubrics
package, which hands them over on import: until then a judgement is refused loudly, never let through."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Every public name of framejudge/schema.py when it was one module (its classes, functions and constants).
OLD_NAMES = (
    "Number", "Whole", "Flag", "Share", "Count",
    "Strategy", "MAX_BUDGET", "MIN_SIDE", "MAX_SIDE", "SamplerParams", "FrameInfo", "VideoInfo",
    "Category", "Preference", "TaskType", "MAX_TEXT", "MAX_TURNS", "MAX_METADATA_DEPTH", "MAX_METADATA_BYTES",
    "Metadata", "Turn", "Item", "ModelName", "ModelTurn", "ModelItem",
    "ResponseGrade", "Judgement", "Usage", "TriageFigures", "FieldThreshold", "Thresholds", "GradeOptions",
    "ReadText", "Provenance", "SwapCheck", "ConfidenceMethod", "Confidence", "TriageMark", "Verdict",
    "JudgeErrorKind", "JudgeError",
    "LabelValues", "LABEL_FIELDS", "FLAG_FIELDS", "text_switch", "judge_values", "HumanLabel", "LABEL_ROW_FIELDS",
    "DottedPath", "mapping_value_problem", "FieldMapping", "LabelMapping", "mapping_problems",
    "Cause", "Standing", "ReviewDecision",
    "http_base", "TokenPrice", "JudgeConfig", "JudgesFile",
    "RECORD_KINDS", "RecordIn",
)

# The ground-floor modules of framejudge the schema may load: the table of judge backends and its error.
GROUND = ("framejudge", "framejudge.backends", "framejudge.errors")
HEAVY = ("av", "torch", "litellm", "transformers", "numpy", "fastapi", "sqlalchemy", "yaml", "typer")


def fresh(code: str) -> subprocess.CompletedProcess[str]:
    """`code` run by a new interpreter from the checkout's root (so this checkout's framejudge is the one)."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_the_schema_imports_no_other_framejudge_package_nor_heavy_libraries():
    proc = fresh("import json, sys\nimport framejudge.schema\nprint(json.dumps(sorted(sys.modules)))")
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    ours = [m for m in loaded if m == "framejudge" or m.startswith("framejudge.")]
    assert [m for m in ours if m not in GROUND and m != "framejudge.schema" and not m.startswith("framejudge.schema.")] == []
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY]
    assert heavy == []


def test_every_name_of_the_single_module_is_still_importable():
    import framejudge.schema as schema

    missing = [name for name in OLD_NAMES if not hasattr(schema, name)]
    assert missing == []
    assert set(OLD_NAMES) <= set(schema.__all__)
    assert all(hasattr(schema, name) for name in schema.__all__)
    exec(f"from framejudge.schema import {', '.join(OLD_NAMES)}", {})


def test_the_modules_of_the_schema_import_only_each_other():
    for path in (ROOT / "framejudge" / "schema").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                ground = node.level == 2 and f"framejudge.{node.module}" in GROUND
                assert node.level <= 1 or ground, (path.name, node.module)
                assert not (node.module or "").startswith("framejudge"), (path.name, node.module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("framejudge") for a in node.names), path.name


def test_the_schema_alone_checks_a_judgement_and_reads_the_default_thresholds():
    """With nothing but the schema imported: a judgement's own rules hold, a rubric passed in adds
    its own, and `triage: "default"` reads the packaged thresholds."""
    code = """
import sys
import framejudge.schema as s
pair = {"response_a": {"category": "Successful", "rationale": "r"},
        "response_b": {"category": "Missing", "rationale": "r"}, "preference": "B", "deciding_criterion": "category"}
try:
    s.Judgement.model_validate(pair)
except ValueError as exc:
    print("broken:", "must be A" in str(exc))
print("default:", s.GradeOptions.model_validate({"triage": "default"}).triage.judge_backend)
print("alone:", sorted(m.split(".")[1] for m in sys.modules if m.startswith("framejudge.") and m.count(".") >= 1
                       and not m.startswith("framejudge.schema")))
"""
    proc = fresh(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["broken: True", "default: reference", "alone: ['backends', 'errors']"]


def test_a_rubric_in_the_context_adds_its_own_rules():
    from framejudge.rubrics import get_rubric
    from framejudge.rubrics.rules import check_judgement
    from framejudge.schema import Judgement

    rubric = get_rubric("video-qa")
    data = {"response_a": {"category": "Successful", "rationale": "r"},
            "response_b": {"category": "Successful", "rationale": "r"}, "preference": "A",
            "deciding_criterion": "no-such-criterion"}
    Judgement.model_validate(data)  # any rubric's rules: nothing wrong
    with pytest.raises(ValueError, match="unknown deciding criterion 'no-such-criterion'"):
        Judgement.model_validate(data, context={"rubric": rubric})
    error = {"response_a": {"category": "Successful", "rationale": "r"}}
    with pytest.raises(ValueError, match="fixed error string"):
        Judgement.model_validate(error, context={"rubric": rubric,
                                                 "responses": {"a": rubric.error_messages.exact[0], "b": None}})
    judgement = Judgement.model_validate(data)
    assert check_judgement(judgement, {"rubric": rubric}) == rubric.judgement_problems(judgement, {})
