"""Chat completions sent straight to an OpenAI-compatible server (vLLM, SGLang, llama.cpp's server,
TGI, a gateway) over one aiohttp session per event loop, for the litellm judges that name such a
server by `api_base` with `openai/` or `hosted_vllm/`.

Why not through litellm: on those routes litellm sends the body as it is given (the contract tests
check that both routes put the same request on the wire), but it spends about 10 ms of CPU per call
on its logging, its own cost lookup and the OpenAI SDK's request and reply models, and about 4 s
importing itself. A self-hosted server is where a run keeps 32 or more calls in flight for hours,
and there that CPU is what the run waits for (bench/runner.py). aiohttp is already what litellm
sends through. Everything else about a call (retries, the endpoint's gate, re-asks, output modes,
cost, errors as records) stays in LiteLLMJudge, the same for both routes.

The reply is the server's JSON read into attribute-style namespaces (`reply.choices[0].message.content`,
`reply.usage.prompt_tokens`), the shape litellm's replies have; errors are `WireError`s that carry
the HTTP status and headers (Retry-After), a time-out or a dropped connection.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator, Mapping
from types import SimpleNamespace
from typing import Any

from .model_http import (ACCEPT_ENCODING, RedirectRefused, ReplyLimit, ReplyTooLarge, is_redirect, max_reply_bytes,
                         read_capped)

DIRECT_PROVIDERS = ("openai", "hosted_vllm")  # litellm prefixes whose servers speak OpenAI's chat completions
# words of a 400 that is about the prompt itself (too long for the model, or refused by a content
# policy), not about what is asked of the reply: such a request is not asked again without the
# schema or the log-probabilities (the words OpenAI's errors and vLLM's use)
_TOO_LONG = ("context_length_exceeded", "context length", "maximum context", "too many tokens", "prompt is too long")
_POLICY = ("content_policy_violation", "content_filter", "usage policy", "safety system", "content management policy")


class WireError(Exception):
    """A call to an OpenAI-compatible server that did not produce a reply."""

    status_code: int | None = None
    headers: Mapping[str, str] | None = None


class WireStatusError(WireError):
    """The server answered with an HTTP error status."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None, code: str = "") -> None:
        super().__init__(f"HTTP {status}: {message}" + (f" ({code})" if code else ""))
        self.status_code = status
        self.headers = headers
        self.message = message
        self.code = code

    def _says(self, words: tuple[str, ...]) -> bool:
        text = f"{self.code} {self.message}".lower()
        return self.status_code == 400 and any(w in text for w in words)

    @property
    def content_policy(self) -> bool:
        """A 400 that refuses the prompt under a content policy."""
        return self._says(_POLICY)

    @property
    def about_prompt(self) -> bool:
        """A 400 about the prompt itself: too long for the model, or refused by a content policy."""
        return self._says(_TOO_LONG) or self.content_policy


class WireReplyRefused(WireError):
    """The server's answer was not read: a redirect (never followed), or a body over the cap
    (model_http). Not retried: the same server would answer the same."""

    def __init__(self, limit: ReplyLimit) -> None:
        super().__init__(str(limit))
        self.limit = limit


class WireTimeout(WireError):
    """No reply within the call's time limit."""


class WireConnectionError(WireError):
    """The connection could not be made, or was dropped before a reply."""


def direct_route(model: str, api_base: str | None) -> bool:
    """Whether a litellm model name is sent straight to its server: an OpenAI-compatible one named
    by `api_base` (OpenAI itself, with no api_base, goes through litellm, which maps parameters per
    model family there)."""
    provider, slash, _ = model.partition("/")
    return bool(api_base) and bool(slash) and provider in DIRECT_PROVIDERS


def wire_model(model: str) -> str:
    """The model name the server is sent: the litellm name without its provider prefix."""
    provider, slash, name = model.partition("/")
    return name if slash else provider


def _namespace(data: dict[str, Any]) -> SimpleNamespace:
    return SimpleNamespace(**data)


_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
_holders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncIterator[None]] = weakref.WeakKeyDictionary()


async def _held(session: Any) -> AsyncIterator[None]:
    """Closes the loop's session when the loop shuts its async generators down (asyncio.run does,
    before it closes the loop), so that no connection outlives its loop."""
    try:
        yield
    finally:
        await session.close()


async def session() -> Any:
    """This event loop's aiohttp session (connections kept alive between calls; no limit of its own:
    the endpoint's gate bounds the calls in flight)."""
    import aiohttp

    loop = asyncio.get_running_loop()
    current = _sessions.get(loop)
    if current is None or current.closed:
        current = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), trust_env=True)
        holder = _held(current)
        await holder.__anext__()
        _sessions[loop], _holders[loop] = current, holder
    return current


def _error(text: str) -> tuple[str, str]:
    """An error body's message and code (OpenAI's `{"error": {"message", "code"}}`, vLLM's and
    others' variants), else the body's start."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text[:500], ""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:500], str(error.get("code") or "")
    if isinstance(error, str):
        return error[:500], ""
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])[:500], str(data.get("code") or "")
    return text[:500], ""


async def chat_completion(api_base: str, api_key: str | None, body: dict[str, Any], timeout: float) -> Any:
    """POST `body` to `{api_base}/chat/completions`; the reply as namespaces, or a WireError. A
    redirect is not followed, and the reply's body is read no further than the cap (model_http)."""
    import aiohttp

    headers = {"Content-Type": "application/json", "Accept-Encoding": ACCEPT_ENCODING}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    client = await session()
    url = api_base.rstrip("/") + "/chat/completions"
    cap = max_reply_bytes()
    try:
        async with client.post(url, data=json.dumps(body), headers=headers, allow_redirects=False,
                               auto_decompress=False,
                               timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            if is_redirect(response.status):
                raise WireReplyRefused(RedirectRefused(response.status, response.headers.get("Location")))
            encoding = response.headers.get("Content-Encoding")
            if not encoding and (response.content_length or 0) > cap:
                raise WireReplyRefused(ReplyTooLarge(cap))
            try:
                data = await read_capped(response.content.iter_chunked(64 * 1024), cap, encoding)
            except ReplyLimit as exc:
                raise WireReplyRefused(exc) from None
            try:
                text = data.decode(response.charset or "utf-8", errors="replace")
            except LookupError:  # a charset Python does not know
                text = data.decode("utf-8", errors="replace")
            if response.status >= 400:
                message, code = _error(text)
                raise WireStatusError(response.status, message, dict(response.headers), code)
    except asyncio.TimeoutError:
        raise WireTimeout(f"no reply from {url} within {timeout:g} s") from None
    except aiohttp.ClientError as exc:
        raise WireConnectionError(f"{url}: {type(exc).__name__}: {exc}") from None
    try:
        reply = json.loads(text, object_hook=_namespace)
        reply.choices[0].message  # noqa: B018 - a reply without a message is not a reply
    except (json.JSONDecodeError, AttributeError, IndexError, TypeError):
        raise WireStatusError(response.status, f"not a chat completion: {text[:300]!r}") from None
    return reply
