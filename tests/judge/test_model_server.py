"""bench/model_server.py, the stand-in for a slow hosted model API, over real HTTP on loopback."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("aiohttp")

from bench.model_server import ModelServer
from framejudge.rubrics import get_rubric
from framejudge.rubrics.prompt import PromptFrame, render_prompt
from framejudge.schema import Item, Judgement

ROOT = Path(__file__).resolve().parents[2]
PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"


def _messages(question: str = "What bird is this?", pairwise: bool = True) -> list[dict]:
    turn = {"question": question, "golden": "A grey heron.", "response_a": "x"}
    if pairwise:
        turn["response_b"] = "y"
    item = Item(id="t", turns=[turn])
    frames = [PromptFrame(0.5, PIXEL), PromptFrame(1.25, PIXEL)]
    return render_prompt(get_rubric("video-qa"), item, frames).messages


def _post(server: ModelServer, messages: list[dict], **kw) -> httpx.Response:
    body = {"model": "bench-vlm", "messages": messages, "response_format": {"type": "json_object"}}
    return httpx.post(server.base_url + "/chat/completions", json=body, timeout=10, **kw)


async def _gather(server: ModelServer, messages: list[dict], n: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=10,
                                 limits=httpx.Limits(max_connections=n + 10)) as client:
        return await asyncio.gather(*[client.post("/chat/completions", json={"messages": messages})
                                      for _ in range(n)])


@pytest.mark.parametrize("pairwise", [True, False])
def test_completion_is_a_valid_judgement(pairwise):
    context = {"rubric": get_rubric("video-qa"), "responses": {"a": "x", "b": "y"} if pairwise else {"a": "x"}}
    with ModelServer() as server:
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        r = _post(server, _messages(pairwise=pairwise))
        assert r.status_code == 200
        body = r.json()
        j = Judgement.model_validate_json(body["choices"][0]["message"]["content"], context=context)
        assert (j.response_b is not None) == pairwise
        assert j.preference == ("Both" if pairwise else None)
        assert body["model"] == "bench-vlm" and body["choices"][0]["finish_reason"] == "stop"
        usage = body["usage"]
        assert usage["prompt_tokens"] > 2000 + 2 * 85 and 30 <= usage["completion_tokens"] <= 200
        # without response_format, a plain string content, and the models list
        plain = httpx.post(server.base_url + "/chat/completions", timeout=10,
                           json={"messages": [{"role": "user", "content": "Response A: x"}]})
        Judgement.model_validate_json(plain.json()["choices"][0]["message"]["content"])
        models = httpx.get(server.base_url + "/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["bench-vlm"]
        assert server.stats()["completed"] == 2


def test_latency_is_applied():
    with ModelServer(latency=0.3) as server:
        start = time.monotonic()
        assert _post(server, _messages()).status_code == 200
        assert time.monotonic() - start >= 0.3
        server.configure(latency=0.0)
        start = time.monotonic()
        assert _post(server, _messages()).status_code == 200
        assert time.monotonic() - start < 0.3


def test_peak_in_flight_counts_concurrent_requests():
    with ModelServer(latency=0.3) as server:
        responses = asyncio.run(_gather(server, _messages(), 20))
        assert [r.status_code for r in responses] == [200] * 20
        stats = server.stats()
        assert stats["peak_in_flight"] == 20 and stats["in_flight"] == 0
        assert stats["requests"] == stats["completed"] == 20 and stats["status_counts"] == {200: 20}
        assert stats["sustained_rps"] > 0 and stats["completed_per_second"] > 0
        server.reset()
        assert server.stats()["requests"] == 0 and server.stats()["peak_in_flight"] == 0


def test_rate_limit_answers_429_with_retry_after():
    with ModelServer(rate_limit=5) as server:
        responses = asyncio.run(_gather(server, _messages(), 30))
        limited = [r for r in responses if r.status_code == 429]
        assert limited and len(limited) < 30
        assert {r.status_code for r in responses} == {200, 429}
        for r in limited:
            assert 0 < int(r.headers["retry-after-ms"]) <= 200
            assert int(r.headers["Retry-After"]) >= 1
            error = r.json()["error"]
            assert error["type"] == "rate_limit_error" and error["code"] == "rate_limit_exceeded"
        assert server.stats()["status_counts"][429] == len(limited)
        # a request after the advertised wait gets a token
        time.sleep(max(int(r.headers["retry-after-ms"]) for r in limited) / 1000)
        assert _post(server, _messages()).status_code == 200


def test_overload_answers_429_until_it_ends():
    with ModelServer(overload_for=30, overload_retry_after=2) as server:
        r = _post(server, _messages())
        assert r.status_code == 429 and r.headers["Retry-After"] == "2"
        assert r.headers["retry-after-ms"] == "2000"
        server.configure(overload_until=None)
        assert _post(server, _messages()).status_code == 200


def test_tags_count_successful_calls():
    with ModelServer() as server:
        for _ in range(3):
            assert _post(server, _messages("[item i17] What bird is this?")).status_code == 200
        assert _post(server, _messages("[item i18] And this one?", pairwise=False)).status_code == 200
        server.configure(status_error=503)
        r = _post(server, _messages("[item i17] What bird is this?"))
        assert r.status_code == 503 and r.json()["error"]["type"] == "server_error"
        stats = server.stats()
        assert stats["by_tag"] == {"i17": 3, "i18": 1}
        assert stats["status_counts"] == {200: 4, 503: 1} and stats["requests"] == 5


def test_hang_and_closed_connections():
    with ModelServer(hang=True) as server:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.base_url + "/chat/completions", json={"messages": _messages()}, timeout=0.3)
        server.configure(hang=False, close_connections=True)
        with pytest.raises(httpx.RemoteProtocolError):
            _post(server, _messages())
        stats = server.stats()
        assert stats["requests"] == 2 and stats["completed"] == 0 and stats["aborted"] == 1
        assert stats["peak_in_flight"] >= 1


def test_subprocess_prints_ready_and_answers_admin():
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "model_server.py"), "--port", "0",
                             "--latency", "0.05", "--rate-limit", "100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("ready http://127.0.0.1:") and line.endswith("/v1"), proc.stderr.read()
        base = line.split()[1]
        root = base.removesuffix("/v1")
        r = httpx.post(base + "/chat/completions", json={"messages": _messages("[item s1] Q?")}, timeout=10)
        assert r.status_code == 200
        stats = httpx.get(root + "/admin/stats", timeout=10).json()
        assert stats["completed"] == 1 and stats["by_tag"] == {"s1": 1} and stats["status_counts"] == {"200": 1}
        new = httpx.post(root + "/admin/configure", json={"overload_for": 5}, timeout=10)
        assert new.status_code == 200 and new.json()["rate_limit"] == 100
        assert httpx.post(base + "/chat/completions", json={"messages": _messages()}, timeout=10).status_code == 429
        assert httpx.post(root + "/admin/configure", json={"nonsense": 1}, timeout=10).status_code == 400
        assert httpx.post(root + "/admin/reset", timeout=10).status_code == 200
        assert httpx.get(root + "/admin/stats", timeout=10).json()["requests"] == 0
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
