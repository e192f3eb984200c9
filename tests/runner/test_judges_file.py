"""Judges files: what a good one gives every door, and the errors a bad one gets (file, line, field)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from framejudge.judge import JudgeSpecError
from framejudge.runner.judges import Judges, JudgesFileError, load_judges_file

GOOD = """\
judges:
  - spec: reference
  - spec: litellm:openai/qwen-vl
    api_base: http://127.0.0.1:9/v1
    api_key_env: FJ_TEST_KEY
    concurrency: 3
    max_concurrency: 12
    requests_per_minute: 600
    tokens_per_minute: 100000
    timeout_s: 30
    overload_budget_s: 90
    price: {prompt_usd_per_token: 0.000001, completion_usd_per_token: 0.000002}
    output: json_object
"""


def test_a_good_file_configures_judge_and_endpoint(tmp_path, monkeypatch):
    pytest.importorskip("litellm")
    path = tmp_path / "judges.yaml"
    path.write_text(GOOD)
    monkeypatch.setenv("FJ_TEST_KEY", "sk-local")
    judges = Judges(load_judges_file(path))
    judge = judges.make("litellm:openai/qwen-vl")
    assert judge.api_base == "http://127.0.0.1:9/v1" and judge.api_key == "sk-local"
    assert judge.timeout == 30 and judge.overload_budget_s == 90 and judge.price == (0.000001, 0.000002)
    assert judge.output == "json_object"
    state = judge.gate.state()
    assert (state.limit, state.maximum) == (3, 12)
    assert judges.make("litellm:openai/qwen-vl") is judge  # one judge, one gate per process
    other = judges.make("litellm:openai/not-listed")  # no entry: the defaults
    assert other.gate.state().limit == 8 and other.gate is not judge.gate and other.output == "schema"


def test_a_missing_key_variable_is_named(tmp_path, monkeypatch):
    pytest.importorskip("litellm")
    path = tmp_path / "judges.yaml"
    path.write_text(GOOD)
    monkeypatch.delenv("FJ_TEST_KEY", raising=False)
    with pytest.raises(JudgeSpecError, match=r"\$FJ_TEST_KEY, which is not set"):
        Judges(load_judges_file(path)).make("litellm:openai/qwen-vl")


@pytest.mark.parametrize("text, expected", [
    ("judges: [", ":1: not valid YAML"),
    ("- spec: reference\n", ":1: a judges file is a mapping"),
    ("judges: []\n", ":1: judges: List should have at least 1 item"),
    ("judges:\n  - spec: reference\n  - spec: oracle\n", ":3: judges.1: unknown judge 'oracle'"),
    ("judges:\n  - spec: litellm:m\n    concurrency: 0\n", ":3: judges.0.concurrency: Input should be greater than or equal to 1"),
    ("judges:\n  - spec: litellm:m\n    concurrency: 9\n    max_concurrency: 4\n",
     ":2: judges.0: concurrency (9) is above max_concurrency (4)"),
    ("judges:\n  - spec: litellm:m\n    timeout_s: fast\n", ":3: judges.0.timeout_s: Input should be a valid number"),
    # numbers and switches as YAML writes them, not as text that looks like one
    ("judges:\n  - spec: litellm:m\n    concurrency: '4'\n", ":3: judges.0.concurrency: Input should be a valid integer"),
    ("judges:\n  - spec: litellm:m\n    timeout_s: '30'\n", ":3: judges.0.timeout_s: Input should be a valid number"),
    ("judges:\n  - spec: litellm:m\n    logprobs: 'yes'\n", ":3: judges.0.logprobs: Input should be a valid boolean"),
    ("judges:\n  - spec: litellm:m\n    output: grammar\n",
     ":3: judges.0.output: Input should be 'auto', 'schema' or 'json_object'"),
    ("judges:\n  - spec: litellm:m\n    colour: red\n", ":3: judges.0.colour: Extra inputs are not permitted"),
    ("judges:\n  - spec: litellm:m\n    api_key_env: sk-abc123\n", ":3: judges.0.api_key_env: String should match"),
    ("judges:\n  - spec: litellm:m\n  - spec: litellm:m\n",
     ":3: judges.1.spec: judge 'litellm:m' is listed twice (first as judges.0)"),
    ("judges:\n  - spec: litellm:m\n    price: {prompt_usd_per_token: -1}\n",
     ":3: judges.0.price.prompt_usd_per_token: Input should be greater than or equal to 0"),
    # options that would do nothing: a judge that runs in this process has no server, key, pace or price
    ("judges:\n  - spec: reference\n    api_base: http://127.0.0.1:9/v1\n",
     ":3: judges.0.api_base: does nothing for 'reference': the reference judge runs in this process"),
    ("judges:\n  - spec: litellm:m\n  - spec: transformers:some/model\n\n    price: {prompt_usd_per_token: 0}\n",
     ":5: judges.1.price: does nothing for 'transformers:some/model'"),
    ("judges:\n  - spec: reference\n    concurrency: 4\n", ":3: judges.0.concurrency: does nothing for 'reference'"),
    ("judges:\n  - spec: reference\n    output: schema\n", ":3: judges.0.output: does nothing for 'reference'"),
    # a base that is not a server's address
    ("judges:\n  - spec: litellm:m\n    api_base: file:///etc/passwd\n",
     ":3: judges.0.api_base: 'file:///etc/passwd' is not a server's address: give http:// or https://"),
    ("judges:\n  - spec: litellm:m\n    api_base: localhost:8000/v1\n", ":3: judges.0.api_base: 'localhost:8000/v1' is not"),
    ("judges:\n  - spec: litellm:m\n    api_base: http://:8000/v1\n", ":3: judges.0.api_base: 'http://:8000/v1' is not"),
    ("judges:\n  - spec: litellm:m\n    api_base: http://host:port/v1\n", ":3: judges.0.api_base: 'http://host:port/v1'"),
])
def test_bad_files_name_the_line_and_field(tmp_path, text, expected):
    path = tmp_path / "judges.yaml"
    path.write_text(text)
    with pytest.raises(JudgesFileError) as info:
        load_judges_file(path)
    assert str(info.value).startswith(str(path)) and expected in str(info.value), info.value


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(JudgesFileError, match="no such judges file"):
        load_judges_file(tmp_path / "nope.yaml")


@pytest.mark.parametrize("command", [["grade", "ITEMS", "--judges", "FILE", "--out", "OUT"], ["worker"], ["serve"]])
def test_every_command_refuses_a_bad_file_with_its_line(tmp_path, command):
    bad = tmp_path / "judges.yaml"
    bad.write_text("judges:\n  - spec: litellm:m\n    timeout_s: -1\n")
    items = Path(__file__).parents[2] / "examples" / "items.jsonl"
    args = [str(bad) if a == "FILE" else str(items) if a == "ITEMS" else str(tmp_path / "v.jsonl") if a == "OUT"
            else a for a in command]
    env = {"FRAMEJUDGE_JUDGES_FILE": str(bad), "FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"error: {bad}:3: judges.0.timeout_s: Input should be greater than 0" in proc.stderr


@pytest.mark.parametrize("field, value, words", [
    ("requests_per_minute", ".inf", "finite"), ("tokens_per_minute", "1e-300", "greater than or equal to 100"),
    ("requests_per_minute", "1e-9", "greater than or equal to 0.1"), ("timeout_s", ".nan", "finite"),
    ("tokens_per_minute", "5E1", "greater than or equal to 100"),  # YAML 1.2 exponents are numbers
])
def test_rates_and_times_that_would_hang_a_run_are_refused(tmp_path, field, value, words):
    path = tmp_path / "judges.yaml"
    path.write_text(f"judges:\n  - spec: litellm:m\n    {field}: {value}\n")
    with pytest.raises(JudgesFileError, match=f":3: judges.0.{field}: .*{words}"):
        load_judges_file(path)


def test_grade_refuses_a_judge_the_given_file_does_not_list(tmp_path):
    path = tmp_path / "judges.yaml"
    path.write_text("judges:\n  - spec: litellm:openai/bench\n    api_base: http://127.0.0.1:9/v1\n")
    items = Path(__file__).parents[2] / "examples" / "items.jsonl"
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--judges", str(path),
                           "--judge", "litellm:openai/Bench", "--out", str(tmp_path / "v.jsonl"), "--yes"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "judge 'litellm:openai/Bench' is not in the judges file (it has: litellm:openai/bench)" in proc.stderr


def test_option_errors_name_the_option(tmp_path):
    items = Path(__file__).parents[2] / "examples" / "items.jsonl"
    for args, words in ((["--samples", "100", "--judge", "litellm:openai/m"], "samples: Input should be less than or equal to 32"),
                        (["--concurrency", "5000"], "--concurrency 5000: Input should be less than or equal to 4096"),
                        (["--max-concurrency", "5000"], "--max-concurrency 5000: Input should be less than or equal to 4096"),
                        (["--decode-timeout", "nan"], "--decode-timeout nan: Input should be a finite number")):
        proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), *args,
                               "--out", str(tmp_path / "v.jsonl")], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and words in proc.stderr, (args, proc.stderr)


def test_the_service_and_the_cli_refuse_a_base_that_is_no_server(tmp_path):
    good = tmp_path / "judges.yaml"
    good.write_text("judges:\n  - spec: reference\n    api_base: https://models.example.com/v1\n")
    env = {"FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp_path / 'db.sqlite'}", "PATH": "/usr/bin:/bin"}
    for extra, words in (({"FRAMEJUDGE_JUDGES_FILE": str(good)},
                          f"error: {good}:3: judges.0.api_base: does nothing for 'reference'"),
                         ({"FRAMEJUDGE_API_BASE": "file:///srv/models"},
                          "error: FRAMEJUDGE_API_BASE: 'file:///srv/models' is not a server's address")):
        for command in (["serve", "--port", "0"], ["worker"]):
            proc = subprocess.run([sys.executable, "-m", "framejudge.cli", *command], capture_output=True, text=True,
                                  timeout=120, env={**env, **extra})
            assert proc.returncode == 2 and "Traceback" not in proc.stderr and words in proc.stderr, proc.stderr
    items = Path(__file__).parents[2] / "examples" / "items.jsonl"
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--judge", "litellm:openai/m",
                           "--api-base", "file:///srv/models", "--out", str(tmp_path / "v.jsonl"), "--yes"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "api_base (--api-base, FRAMEJUDGE_API_BASE): 'file:///srv/models' is not" in \
        proc.stderr, proc.stderr


def test_an_endpoint_is_one_endpoint_however_its_address_is_written():
    """A worker takes a job only where its judge calls the server's endpoint: a trailing slash or
    the host's case must not make a job wait for ever."""
    from framejudge.runner.judges import judge_endpoint

    written = ["http://gpu-1:8000/v1", "http://gpu-1:8000/v1/", "HTTP://GPU-1:8000/v1", "http://Gpu-1:8000/v1//"]
    assert {judge_endpoint("litellm:hosted_vllm/m", {}, w) for w in written} == {"http://gpu-1:8000/v1"}
    assert judge_endpoint("litellm:hosted_vllm/m", {"litellm:hosted_vllm/m": "http://gpu-2:8000/v1/"},
                          "http://gpu-1:8000/v1") == "http://gpu-2:8000/v1"
    # a path keeps its case
    assert judge_endpoint("litellm:hosted_vllm/m", {}, "http://gpu-1:8000/V1") != "http://gpu-1:8000/v1"
    assert judge_endpoint("reference", {}, "http://gpu-1:8000/v1") == ""
    assert judge_endpoint("litellm:gpt-4o", {}, None) == ""
