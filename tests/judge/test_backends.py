"""The table of judge backends: every place reads it, and a package outside framejudge adds a backend
through the `framejudge.judges` entry point, usable by `grade` and by the service alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from framejudge import backends
from framejudge.backends import Backend, JudgeSpecError, parse
from framejudge.judge import JudgeBase, ReferenceJudge, judge_class, make_judge
from framejudge.schema import JudgeConfig

ROOT = Path(__file__).parents[2]

PLUGIN = '''
from framejudge.backends import Backend, Capabilities
from framejudge.judge import JudgeBase, JudgeResult
from framejudge.schema import Judgement


class ConstantJudge(JudgeBase):
    """Grades every answer with the category its spec names: constant:Successful."""

    backend = "constant"
    needs_frames = False
    deterministic = True

    def __init__(self, category: str) -> None:
        self.category = category
        self.model_id = f"constant-{category}"

    async def judge(self, request):
        turn = request.item.turns[request.turn]
        data = {"response_a": {"category": self.category, "rationale": "always the same"}}
        if turn.response_b is not None:
            data["response_b"] = {"category": self.category, "rationale": "always the same"}
            data["preference"] = "Both" if self.category == "Successful" else "Neither"
        return JudgeResult(Judgement.model_validate(data))


BACKEND = Backend("constant", "<category>", "constant_judge:ConstantJudge",
                  "grades every answer alike (a test double)", Capabilities(deterministic=True))
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """An installed distribution (a .dist-info folder on the path) that registers the backend
    `constant` through the entry point; the table is read again with it."""
    yield from _installed(tmp_path, monkeypatch, PLUGIN)


@pytest.fixture
def paid_plugin(tmp_path, monkeypatch):
    """The same backend, its table entry saying its calls cost money (as docs/extending.md tells authors to
    say it), its judge class saying nothing of it."""
    yield from _installed(tmp_path, monkeypatch, PLUGIN.replace("Capabilities(deterministic=True)",
                                                                "Capabilities(deterministic=True, spends=True)"))


def _installed(tmp_path, monkeypatch, source):
    monkeypatch.delitem(sys.modules, "constant_judge", raising=False)  # another test's plugin, imported before
    site = tmp_path / "site"
    site.mkdir()
    (site / "constant_judge.py").write_text(source)
    info = site / "constant_judge-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: constant-judge\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[framejudge.judges]\nconstant = constant_judge:BACKEND\n")
    monkeypatch.syspath_prepend(str(site))
    backends.backends.cache_clear()
    yield site
    backends.backends.cache_clear()


def test_the_builtin_table():
    table = backends.backends()
    assert [b.form for b in table.values()][:3] == ["reference", "litellm:<model>", "transformers:<path>"]
    assert parse("litellm:openai/gpt-4o")[1] == "openai/gpt-4o" and parse("reference")[1] == ""
    for bad in ["", "reference:x", "litellm", "litellm:", "transformers", "nope:x", "nope"]:
        with pytest.raises(JudgeSpecError, match="unknown judge .*use 'reference', 'litellm:<model>' or "
                                                 "'transformers:<path>'"):
            parse(bad)
    # the classes agree with what the table says of them
    assert judge_class("reference") is ReferenceJudge and ReferenceJudge.deterministic
    assert table["reference"].capabilities.deterministic and not table["litellm"].capabilities.deterministic
    assert isinstance(make_judge("reference"), ReferenceJudge)


def test_a_backend_whose_libraries_are_missing_says_how_to_install_them():
    missing = Backend("ghost", "<x>", "nowhere:Nothing", "needs a module that is not installed",
                      extra="ghost", needs=("framejudge_no_such_module",))
    with pytest.raises(JudgeSpecError, match=r"the ghost judge needs framejudge_no_such_module: "
                                             r"pip install '\.\[ghost\]'"):
        missing.load()


def test_a_broken_or_misnamed_plugin_is_left_out(tmp_path, monkeypatch, caplog):
    site = tmp_path / "site"
    (site / "broken-0.1.dist-info").mkdir(parents=True)
    (site / "broken-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (site / "broken-0.1.dist-info" / "entry_points.txt").write_text(
        "[framejudge.judges]\nbroken = no_such_module:BACKEND\nreference = framejudge.backends:BUILTIN\n")
    monkeypatch.syspath_prepend(str(site))
    backends.backends.cache_clear()
    try:
        table = backends.backends()
        assert "broken" not in table and table["reference"].judge.endswith("ReferenceJudge")
        assert "cannot be loaded" in caplog.text and "left out" in caplog.text
    finally:
        backends.backends.cache_clear()


def test_a_plugin_backend_is_in_the_table_and_made_from_a_spec(plugin):
    assert backends.backends()["constant"].form == "constant:<category>"
    assert "'constant:<category>'" in backends.forms()
    judge = make_judge("constant:Successful")
    assert isinstance(judge, JudgeBase) and judge.model_id == "constant-Successful"
    assert JudgeConfig(spec="constant:Successful").spec == "constant:Successful"  # a judges file may name it


def test_grade_uses_a_plugin_backend(plugin, tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "q1", "turns": [{"question": "What colour is the car?", "golden": "Red.",
                                                        "response_a": "Blue.", "response_b": "Red."}]}) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(plugin)])}
    shown = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", "--help"], capture_output=True,
                           text=True, timeout=120, env={**env, "COLUMNS": "250"})
    assert "constant:<category>" in shown.stdout
    out = tmp_path / "out.jsonl"
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--judge",
                           "constant:Successful", "--out", str(out), "--no-swap"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["provenance"]["judge_backend"] == "constant"
    assert record["response_a"]["category"] == "Successful" and record["preference"] == "Both"
    unknown = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--judge", "constant",
                              "--out", str(tmp_path / "x.jsonl")], capture_output=True, text=True, timeout=120, env=env)
    assert unknown.returncode == 2
    assert "error: unknown judge 'constant':" in unknown.stderr and "'constant:<category>'" in unknown.stderr


def test_a_plugin_whose_table_entry_spends_asks_before_a_run(paid_plugin, tmp_path):
    from typer.testing import CliRunner

    from framejudge.cli import app
    from framejudge.judge.base import spends

    assert spends(make_judge("constant:Successful"))
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "q1", "turns": [{"question": "What colour is the car?", "golden": "Red.",
                                                        "response_a": "Blue."}]}) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["grade", str(items), "--judge", "constant:Successful", "--out", str(out), "--no-swap"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2 and "this judge spends tokens: pass --yes" in refused.output
    assert not out.exists()  # nothing was called
    assert CliRunner().invoke(app, [*args, "--yes"]).exit_code == 0 and out.exists()


def test_a_free_plugin_runs_without_asking(plugin):
    from framejudge.judge.base import spends

    assert not spends(make_judge("constant:Successful")) and not spends(make_judge("reference"))


def test_the_service_uses_a_plugin_backend(plugin, tmp_path):
    from framejudge.service.app import create_app
    from framejudge.service.settings import Settings
    from framejudge.service.store import create_key, engine_for

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                        judges=["reference", "constant:Not Successful"])
    key = create_key(engine_for(settings.database_url), ["grade"])
    item = {"id": "q1", "turns": [{"question": "What colour?", "golden": "Red.", "response_a": "Red."}]}
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/grade", headers={"Authorization": f"Bearer {key}"},
                        json={"item": item, "judge": "constant:Not Successful", "options": {"cache": False}})
    assert r.status_code == 200, r.text
    [verdict] = r.json()["records"]
    assert verdict["provenance"]["judge_backend"] == "constant"
    assert verdict["response_a"]["category"] == "Not Successful"
    with pytest.raises(ValueError, match="unknown judge 'constantly:x'"):
        Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", judges=["constantly:x"])


def test_nothing_but_the_table_names_the_backends():
    """A backend's spec prefix is written in the table alone: no other module compares a spec with it."""
    offenders = []
    for path in (ROOT / "framejudge").rglob("*.py"):
        if path.name == "backends.py":
            continue
        text = path.read_text()
        for needle in ('startswith("litellm', 'startswith("transformers', 'startswith("reference', '== "litellm"',
                       '== "transformers"', 'kind == "reference"', 'LOCAL_KINDS'):
            if needle in text:
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert not offenders, textwrap.indent("\n".join(offenders), "  ")


@pytest.mark.parametrize("model, video", [
    ("gemini/gemini-2.5-flash", True), ("vertex_ai/gemini-2.5-pro", True), ("gemini-2.5-flash", True),
    ("hosted_vllm/Qwen/Qwen2.5-VL-7B-Instruct", True), ("vertex_ai/claude-sonnet-4", False),
    ("openai/gpt-4o", False), ("gpt-4o-mini", False), ("anthropic/claude-sonnet-4-5", False),
    ("ollama/qwen2.5vl", False), ("ollama_chat/llava", False), ("openai/Qwen2.5-VL", False),
])
def test_which_litellm_models_take_a_video_clip(model, video):
    assert backends.litellm_takes_video(model) is video
    assert (backends.clip_refusal(f"litellm:{model}") is None) is video
    assert make_judge(f"litellm:{model}").takes_video is video


def test_backends_that_send_frames_only_refuse_clips():
    assert backends.backends()["litellm"].capabilities.takes_video
    for spec in ("reference", "transformers:/models/qwen"):
        assert not parse(spec)[0].capabilities.takes_video
        assert "sends frames only" in backends.clip_refusal(spec)
    assert "takes images, not video" in backends.clip_refusal("litellm:openai/gpt-4o")
    # a judges file cannot make clips a judge's default where it takes no video
    with pytest.raises(ValueError, match="video_input clip: the litellm:anthropic/claude-x judge's provider"):
        JudgeConfig(spec="litellm:anthropic/claude-x", video_input="clip")
    assert JudgeConfig(spec="litellm:gemini/gemini-2.5-flash", video_input="clip").video_input.value == "clip"


def test_a_judge_priced_at_zero_for_every_token_spends_nothing():
    """A self-hosted server priced at zero in its judges-file entry runs without --yes; any other price, or
    none (litellm's list), still asks."""
    pytest.importorskip("litellm")
    from framejudge.judge.base import spends
    from framejudge.judge.litellm_backend import LiteLLMJudge

    base = "http://127.0.0.1:9/v1"
    assert not spends(LiteLLMJudge("hosted_vllm/m", api_base=base, price=(0.0, 0.0)))
    assert spends(LiteLLMJudge("hosted_vllm/m", api_base=base, price=(0.0, 1e-6)))
    assert spends(LiteLLMJudge("hosted_vllm/m", api_base=base))
    assert spends(LiteLLMJudge("openai/gpt-4o-mini"))
