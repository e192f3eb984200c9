"""What a model server's answer can make a call do, on both routes a litellm judge sends by (straight
to an OpenAI-compatible server, and through litellm): a redirect is never followed (the prompt and its
frames go nowhere else), a reply's body is read no further than FRAMEJUDGE_MAX_REPLY_MB, and a reply
that drips arrives whole within the call's time limit or not at all. Each ends the turn as a record."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("litellm")

from bench.model_server import ModelServer
from framejudge.judge.litellm_backend import LiteLLMJudge
from framejudge.judge.model_http import Decoder, ReplyTooLarge, max_reply_bytes
from framejudge.schema import JudgeError, JudgeErrorKind, Verdict
from tests.judge.test_litellm_backend import grade
from tests.loopback import Listener

ROOT = Path(__file__).parents[2]
ROUTES = pytest.mark.parametrize("direct", [True, False], ids=["direct", "litellm"])


def judge(server: ModelServer, direct: bool, **kwargs) -> LiteLLMJudge:
    j = LiteLLMJudge("openai/bench-vlm", api_base=server.base_url, api_key="k", max_retries=2, max_wait=0.05,
                     **kwargs)
    assert j.direct
    j.direct = direct
    return j


@ROUTES
@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_not_followed(direct, status):
    with Listener() as elsewhere, ModelServer(redirect_status=status) as server:
        server.configure(redirect_to=f"http://127.0.0.1:{elsewhere.port}/v1/chat/completions")
        [record] = grade(judge(server, direct))
        asked = server.stats()["requests"]
        sent_elsewhere = elsewhere.everything()
    assert isinstance(record, JudgeError), record
    assert record.kind is JudgeErrorKind.backend_error
    assert f"HTTP {status} redirect to 'http://127.0.0.1:{elsewhere.port}/v1/chat/completions' not followed" \
        in record.message and "model API calls never follow redirects" in record.message
    assert sent_elsewhere == []  # the prompt went nowhere else
    assert asked == 1  # and was not sent again


@ROUTES
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_reply_over_the_cap_fails_the_call(direct, declared, monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_MAX_REPLY_MB", "1")
    with ModelServer(pad_bytes=20 * 1024 * 1024, pad_declared=declared) as server:
        [record] = grade(judge(server, direct))
        asked = server.stats()["requests"]
    assert isinstance(record, JudgeError), record
    assert record.kind is JudgeErrorKind.backend_error
    assert record.message == "reply larger than 1 MB"
    assert asked == 1  # not asked again: the same server would answer the same


@ROUTES
def test_a_compressed_reply_is_capped_as_it_inflates(direct, monkeypatch):
    """About 20 KB of gzip that inflates to 20 MB: counted decompressed."""
    monkeypatch.setenv("FRAMEJUDGE_MAX_REPLY_MB", "1")
    with ModelServer(pad_bytes=20 * 1024 * 1024, pad_gzip=True) as server:
        [record] = grade(judge(server, direct))
    assert isinstance(record, JudgeError), record
    assert (record.kind, record.message) == (JudgeErrorKind.backend_error, "reply larger than 1 MB")


@ROUTES
def test_a_compressed_reply_under_the_cap_is_read(direct, monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_MAX_REPLY_MB", "1")
    with ModelServer(pad_bytes=512 * 1024, pad_gzip=True) as server:
        [record] = grade(judge(server, direct))
    assert isinstance(record, Verdict), record


@ROUTES
def test_a_padded_reply_under_the_cap_is_read(direct, monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_MAX_REPLY_MB", "1")
    with ModelServer(pad_bytes=512 * 1024, pad_declared=False) as server:
        [record] = grade(judge(server, direct))
    assert isinstance(record, Verdict), record


@ROUTES
def test_a_dripping_reply_ends_within_the_time_limit(direct):
    """One byte every 50 ms: each read is quick, the whole reply is not (about 20 s); the call's
    0.5 s limit ends it (a timeout, retried within the overload budget, then recorded)."""
    with ModelServer(drip_seconds=0.05) as server:
        [record] = grade(judge(server, direct, timeout=0.5, overload_budget_s=1.0))
    assert isinstance(record, JudgeError), record
    assert record.kind is JudgeErrorKind.timeout


def test_a_compressed_reply_is_counted_decompressed():
    bomb = gzip.compress(b" " * (4 * 1024 * 1024))
    decoder = Decoder("gzip", 1024 * 1024)
    with pytest.raises(ReplyTooLarge, match="reply larger than 1 MB"):
        for k in range(0, len(bomb), 1024):
            decoder.feed(bomb[k:k + 1024])
    small = gzip.compress(b'{"ok": 1}')
    decoder = Decoder("gzip", 1024)
    assert b"".join(decoder.feed(small) + decoder.end()) == b'{"ok": 1}'


def test_the_cap_is_the_operators(monkeypatch):
    monkeypatch.delenv("FRAMEJUDGE_MAX_REPLY_MB", raising=False)
    assert max_reply_bytes() == 8 * 1024 * 1024
    monkeypatch.setenv("FRAMEJUDGE_MAX_REPLY_MB", "0.5")
    assert max_reply_bytes() == 512 * 1024
    for bad in ("lots", "0", "-1"):
        monkeypatch.setenv("FRAMEJUDGE_MAX_REPLY_MB", bad)
        with pytest.raises(ValueError, match="FRAMEJUDGE_MAX_REPLY_MB"):
            max_reply_bytes()


CHILD = textwrap.dedent("""
    import json, resource, sys
    from framejudge.judge.litellm_backend import LiteLLMJudge
    from tests.judge.test_litellm_backend import grade

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    out = {}
    for name, base in (("normal", sys.argv[1]), ("padded", sys.argv[2])):
        for direct in (True, False):
            j = LiteLLMJudge("openai/bench-vlm", api_base=base, api_key="k", max_retries=1)
            j.direct = direct
            [record] = grade(j)
            out[f"{name} {'direct' if direct else 'litellm'}"] = [type(record).__name__,
                                                                  getattr(record, "message", None), peak()]
    print(json.dumps(out))
""")


def test_a_300_mb_reply_costs_little_memory():
    """A grading process's peak memory over two calls answered normally, then over two answered
    with 300 MB (chunked, so that only reading tells its size): the padded calls fail at the cap
    (8 MiB) without the process growing by more than a small part of the reply. The bound here is
    generous; bench/model_replies.py reports the figures."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("FRAMEJUDGE_MAX_REPLY_MB", None)
    with ModelServer() as normal, ModelServer(pad_bytes=300 * 1024 * 1024, pad_declared=False) as padded:
        done = subprocess.run([sys.executable, "-c", CHILD, normal.base_url, padded.base_url], env=env,
                              capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert [out[k][0] for k in ("normal direct", "normal litellm")] == ["Verdict", "Verdict"]
    for route in ("direct", "litellm"):
        assert out[f"padded {route}"][:2] == ["JudgeError", "reply larger than 8 MB"]
    grown = out["padded litellm"][2] - out["normal litellm"][2]
    assert grown < 200 * 1024 * 1024, out
