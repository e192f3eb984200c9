"""What a call to a model provider may read, and where it may go.

- **No redirects.** A model call is a POST of the whole prompt, frames included, to the server the
  operator named; a 3xx answer is never followed (it would send that prompt, and the key, to
  wherever the server points). It fails the call as a `backend_error` that names the status and
  says so (`RedirectRefused`).
- **A reply's body is capped** (FRAMEJUDGE_MAX_REPLY_MB, default `DEFAULT_REPLY_MB` MiB: a
  judgement is a few KB, a reply with log-probabilities some hundreds), counted while it is read,
  after decompression: the call fails with `backend_error: reply larger than N MB` (`ReplyTooLarge`)
  as soon as it passes the cap, never read whole first. A declared Content-Length over the cap fails
  before the body is read.
- **A reply arrives whole within the call's time limit**, however slowly its bytes drip.

A litellm judge call keeps the answers it reads (`reply_bodies`: the httpx responses themselves, whose
bodies the client reads once), for the check of its reply's token usage as the server sent it
(judge/usage.py).

The direct route (openai_wire, aiohttp) applies these itself. Every call litellm makes (the OpenAI
SDK's and litellm's own HTTP clients, for every provider, batch files included) goes through the
transport litellm builds in `AsyncHTTPHandler.create_async_transport`, or through the OpenAI SDK
client litellm makes for its files and batches calls (`OpenAIAsyncHTTPClient`); `bound_litellm`
wraps the transports of both in `BoundedTransport`, which applies the three rules above to every
exchange.
Batch runs' own calls (runner/batch_api.py) read through `read_capped`.
"""

from __future__ import annotations

import contextvars
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

from .. import config

DEFAULT_REPLY_MB = 8
MB = 1024 * 1024
# the encodings a model call asks for and can decode within the cap (a compressed reply is counted
# as it is decompressed, so a small compressed body cannot inflate past the cap)
ACCEPT_ENCODING = "gzip, deflate"

# the cap of the exchanges made in this context, where a caller reads more than one reply (a batch's
# results file); None: max_reply_bytes()
reply_cap: contextvars.ContextVar[int | None] = contextvars.ContextVar("reply_cap", default=None)
# the answers (httpx responses, read by the client as any other: their bodies are not copied) of the
# exchanges made in this context, where a caller keeps them (a litellm judge call, whose reply's token
# usage is checked as the server sent it: judge/usage.py); None: not kept
reply_bodies: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("reply_bodies", default=None)


class ReplyLimit(Exception):
    """A model server's answer that is not read: too large, or a redirect."""


class ReplyTooLarge(ReplyLimit):
    def __init__(self, cap: int) -> None:
        super().__init__(f"reply larger than {mb(cap)} MB")
        self.cap = cap


class RedirectRefused(ReplyLimit):
    def __init__(self, status: int, location: str | None) -> None:
        to = f" to {location[:200]!r}" if location else ""
        super().__init__(f"HTTP {status} redirect{to} not followed: model API calls never follow redirects")
        self.status_code = status


class BadEncoding(ReplyLimit):
    def __init__(self, encoding: str) -> None:
        super().__init__(f"reply in content encoding {encoding[:50]!r}, which was not asked for "
                         f"(asked: {ACCEPT_ENCODING})")


def mb(cap: int) -> str:
    return f"{cap / MB:g}"


def max_reply_bytes() -> int:
    """The cap on one model reply's body, from FRAMEJUDGE_MAX_REPLY_MB."""
    value = config.get("FRAMEJUDGE_MAX_REPLY_MB")
    if value is None or not value.strip():
        return DEFAULT_REPLY_MB * MB
    try:
        cap = float(value)
    except ValueError:
        raise ValueError(f"{config.name('FRAMEJUDGE_MAX_REPLY_MB')}={value!r}: not a number of MiB") from None
    if not cap > 0:
        raise ValueError(f"{config.name('FRAMEJUDGE_MAX_REPLY_MB')}={value!r}: must be above 0")
    return int(cap * MB)


def current_cap() -> int:
    cap = reply_cap.get()
    return cap if cap is not None else max_reply_bytes()


def limit_of(exc: BaseException | None) -> ReplyLimit | None:
    """The ReplyLimit in an exception's chain (litellm and the OpenAI SDK wrap what a transport
    raises), else None."""
    for _ in range(12):
        if exc is None:
            return None
        if isinstance(exc, ReplyLimit):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def is_redirect(status: int) -> bool:
    return 300 <= status < 400 and status != 304


class Decoder:
    """A body's bytes as they arrive, decompressed (gzip, deflate) a bounded piece at a time, and
    counted against `cap` after decompression."""

    def __init__(self, encoding: str | None, cap: int) -> None:
        encoding = (encoding or "identity").strip().lower()
        self.cap = cap
        self.seen = 0
        self._z: Any = None
        if encoding == "gzip" or encoding == "x-gzip":
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._z = zlib.decompressobj()
        elif encoding != "identity":
            raise BadEncoding(encoding)

    def _count(self, data: bytes) -> bytes:
        self.seen += len(data)
        if self.seen > self.cap:
            raise ReplyTooLarge(self.cap)
        return data

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._z is None:
            return [self._count(chunk)] if chunk else []
        out = []
        data = chunk
        while data:
            piece = self._z.decompress(data, 64 * 1024)
            out.append(self._count(piece))
            data = self._z.unconsumed_tail
        return out

    def end(self) -> list[bytes]:
        if self._z is None:
            return []
        return [self._count(self._z.flush())]


async def read_capped(chunks: AsyncIterator[bytes], cap: int, encoding: str | None = None) -> bytes:
    """A body read whole, but no further than `cap` bytes (after decompression)."""
    decoder = Decoder(encoding, cap)
    parts: list[bytes] = []
    async for chunk in chunks:
        parts += decoder.feed(chunk)
    parts += decoder.end()
    return b"".join(parts)


def _httpx_stream(inner: Any, decoder: Decoder, deadline: float | None, request: Any) -> Any:
    import httpx

    class Capped(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in inner:
                if deadline is not None and time.monotonic() > deadline:
                    raise httpx.ReadTimeout("the reply did not arrive whole within the call's time limit",
                                            request=request)
                for piece in decoder.feed(chunk):
                    if piece:
                        yield piece
            for piece in decoder.end():
                if piece:
                    yield piece

        async def aclose(self) -> None:
            await inner.aclose()

    return Capped()


def _total_timeout(request: Any) -> float | None:
    timeout = request.extensions.get("timeout") or {}
    values = [v for v in (timeout.get("read"), timeout.get("connect")) if isinstance(v, (int, float))]
    return max(values) if values else None


def bounded_transport(inner: Any) -> Any:
    """`inner` (an httpx async transport) with the rules above on every exchange."""
    import httpx

    class BoundedTransport(httpx.AsyncBaseTransport):
        def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
            self.inner = inner

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            limit = _total_timeout(request)
            deadline = time.monotonic() + limit if limit is not None else None
            request.headers["Accept-Encoding"] = ACCEPT_ENCODING
            response = await self.inner.handle_async_request(request)
            try:
                if is_redirect(response.status_code):
                    raise RedirectRefused(response.status_code, response.headers.get("location"))
                cap = current_cap()
                declared = response.headers.get("content-length")
                encoding = response.headers.get("content-encoding")
                if declared and declared.isdigit() and int(declared) > cap and not encoding:
                    raise ReplyTooLarge(cap)
                decoder = Decoder(encoding, cap)
            except ReplyLimit:
                await response.aclose()
                raise
            headers = [(k, v) for k, v in response.headers.multi_items()
                       if k.lower() not in ("content-encoding", "content-length")]
            answer = httpx.Response(response.status_code, headers=headers,
                                    stream=_httpx_stream(response.stream, decoder, deadline, request),
                                    extensions=response.extensions, request=request)
            kept = reply_bodies.get()
            if kept is not None:
                kept.append(answer)
            return answer

        async def aclose(self) -> None:
            await self.inner.aclose()

    return BoundedTransport(inner)


def bound_litellm() -> None:
    """Every async HTTP client litellm builds from now on (litellm's own, for every provider, and
    the OpenAI SDK's it hands an httpx client) sends through a BoundedTransport. Idempotent."""
    import httpx
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    if getattr(AsyncHTTPHandler, "_framejudge_bounded", False):
        return
    make = AsyncHTTPHandler.create_async_transport
    mounts = AsyncHTTPHandler.create_httpx_proxy_mounts

    def create_async_transport(ssl_context: Any = None, ssl_verify: Any = None, shared_session: Any = None,
                               http2: bool = False, cert: Any = None, limits: Any = None) -> Any:
        kwargs: dict[str, Any] = dict(ssl_context=ssl_context, ssl_verify=ssl_verify, shared_session=shared_session,
                                      http2=http2, cert=cert)
        if limits is not None:
            kwargs["limits"] = limits
        inner = make(**kwargs)
        if inner is None:  # litellm leaves the transport to httpx: build httpx's default one
            verify = ssl_context if ssl_context is not None else ssl_verify is not False
            inner = httpx.AsyncHTTPTransport(verify=verify, cert=cert, http2=http2,
                                             **({"limits": limits} if limits is not None else {}))
        return bounded_transport(inner)

    def create_httpx_proxy_mounts(transport: Any, *args: Any, **kwargs: Any) -> Any:
        found = mounts(getattr(transport, "inner", transport), *args, **kwargs)
        if not found:
            return found
        return {pattern: bounded_transport(t) if t is not None else None for pattern, t in found.items()}

    AsyncHTTPHandler.create_async_transport = staticmethod(create_async_transport)  # type: ignore[method-assign]
    AsyncHTTPHandler._create_async_transport = staticmethod(create_async_transport)
    AsyncHTTPHandler.create_httpx_proxy_mounts = staticmethod(create_httpx_proxy_mounts)  # type: ignore[method-assign]
    AsyncHTTPHandler._create_httpx_proxy_mounts = staticmethod(create_httpx_proxy_mounts)
    # the OpenAI SDK's client for the calls litellm makes with a static key outside chat completions
    # (its files and batches: a batch run's upload of every request, and its results)
    from litellm.llms.openai import common_utils

    sdk_client = common_utils.OpenAIAsyncHTTPClient
    sdk_init = sdk_client.__init__

    def init(self: Any) -> None:
        sdk_init(self)
        self._transport = bounded_transport(self._transport)
        self._mounts = {pattern: bounded_transport(t) if t is not None else None for pattern, t in self._mounts.items()}

    sdk_client.__init__ = init  # type: ignore[method-assign]
    AsyncHTTPHandler._framejudge_bounded = True  # type: ignore[attr-defined]
