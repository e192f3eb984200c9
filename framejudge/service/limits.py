"""Request limits: per-key rate limits, body sizes checked before (or while) a body is read, and
the pixels and bytes of frames a request may ask for, checked before anything is decoded."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request

from ..frame_sampler.encode import sheet_size
from ..schema import SamplerParams
from .problems import ProblemError, problem

# JPEG bytes per pixel of real video frames by quality: the most seen over real clips, rounded up
# (noise takes more; the encoder's running total catches what the estimate misses)
JPEG_QUALITIES = (1, 50, 85, 95, 100)
JPEG_BYTES_PER_PIXEL = (0.05, 0.12, 0.2, 0.33, 0.65)
DATA_URL_OVERHEAD = 4 / 3  # base64


MAX_BUCKETS = 100_000


class RateLimiter:
    """A token bucket per API key: `per_minute` requests, refilled continuously."""

    def __init__(self, per_minute: int) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def take(self, key: str, spend: bool = True) -> float | None:
        """None if allowed, else seconds until a request would be; `spend` false only looks."""
        now = time.monotonic()
        with self.lock:
            if key not in self.buckets and len(self.buckets) >= MAX_BUCKETS:  # many clients (or made-up
                self.buckets = {k: (t, at) for k, (t, at) in self.buckets.items()  # keys): forget the full ones
                                if t + (now - at) * self.rate < self.capacity}
            tokens, last = self.buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            if tokens >= 1:
                self.buckets[key] = (tokens - 1 if spend else tokens, now)
                return None
            self.buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate


SIGN_IN_FAILURES_PER_KEY = 10  # a minute, for one key id from one client address: someone guessing its secret
SIGN_IN_FAILURES_PER_ADDRESS = 30  # a minute, from one client address, whatever the keys


class SignInThrottle:
    """Failed sign-ins, counted per (key id, client address) and per client address. A client
    whose failures with one key id ran out is refused that key before it is checked (its right
    secret too: the guessing stops); a client address whose failures ran out gets 429 for wrong
    keys but still signs in with a right one, so one client behind a shared proxy cannot lock
    everyone behind it out. Nothing is counted per key id alone: a key id is no secret (reviewers
    see each other's), and one client's failures never refuse another client's right secret."""

    def __init__(self) -> None:
        self.by_pair = RateLimiter(SIGN_IN_FAILURES_PER_KEY)
        self.by_address = RateLimiter(SIGN_IN_FAILURES_PER_ADDRESS)

    @staticmethod
    def _pair(key_id: str, address: str) -> str:
        return f"{key_id}\x00{address}"

    def key_blocked(self, key_id: str, address: str) -> float | None:
        """Seconds until this client may try this key id again (None: it may now)."""
        return self.by_pair.take(self._pair(key_id, address), spend=False)

    def failed(self, key_id: str, address: str) -> float | None:
        """Counts a failure; the seconds to wait when either count has run out (None: not yet)."""
        waits = [self.by_pair.take(self._pair(key_id, address)), self.by_address.take(address)]
        return max((w for w in waits if w is not None), default=None)


class BodyLimit:
    """413 for request bodies over `limit` bytes, before the app reads them. Paths in `own_limits`
    stream their bodies and enforce their own limits (uploads, job submissions)."""

    def __init__(self, app: Any, limit: int, own_limits: tuple[str, ...]) -> None:
        self.app, self.limit, self.own_limits = app, limit, own_limits

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in self.own_limits:
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.limit:
                return await self._too_large(scope, receive, send)
            return await self.app(scope, receive, send)
        chunks, total, more = [], 0, True  # chunked: buffer up to the limit, then replay
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            total += len(chunks[-1])
            if total > self.limit:
                return await self._too_large(scope, receive, send)
            more = message.get("more_body", False)
        body: bytes | None = b"".join(chunks)

        async def replay() -> dict:
            nonlocal body
            if body is None:
                return await receive()
            message, body = {"type": "http.request", "body": body, "more_body": False}, None
            return message

        return await self.app(scope, replay, send)

    async def _too_large(self, scope: dict, receive: Any, send: Any) -> None:
        response = problem(413, "Body too large", f"request bodies are limited to {self.limit // 1024**2} MiB")
        await response(scope, receive, send)


class BodyTimedOut(ProblemError):
    """A request body that stopped arriving."""

    def __init__(self, seconds: float) -> None:
        super().__init__(408, "Request timeout", f"the request body stopped arriving: nothing came for {seconds:g} s "
                                                 "(FRAMEJUDGE_BODY_TIMEOUT)", {"Connection": "close"})


class BodyTimeout:
    """408 for a request whose body stops arriving: each part of it must come within `seconds`
    of the one before, so a client that sends its headers and then stalls (or trickles) does not
    hold the request open for ever. Reads after the body (waiting for a disconnect) are not timed."""

    def __init__(self, app: Any, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        finished = False
        started = False

        async def timed() -> dict:
            nonlocal finished
            if finished:
                return await receive()
            try:
                async with asyncio.timeout(self.seconds):
                    message = await receive()
            except TimeoutError:
                raise BodyTimedOut(self.seconds) from None
            finished = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def sending(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed, sending)
        except BodyTimedOut as exc:  # raised where the body is read, outside the app's own handlers
            if started:
                raise
            await problem(exc.status, exc.title, exc.detail, exc.headers)(scope, receive, send)


async def capped_stream(request: Request, limit: int) -> AsyncIterator[bytes]:
    """The request body as it arrives, with 413 once it passes `limit` bytes."""
    too_large = ProblemError(413, "Body too large", f"this request is limited to {limit / 1024**2:.0f} MiB")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise too_large
        yield chunk


def check_frame_pixels(params: SamplerParams, max_megapixels: float, contact_sheet: bool = False) -> int:
    """422 unless the frames `params` ask for (each counted as max_side x max_side, the largest a
    frame can be) fit in the per-request pixel limit; returns the pixels of the images that would
    be encoded (the frames, or the contact sheet)."""
    decoded = params.n * params.max_side**2
    sheet = sheet_size(params.n)[0] * sheet_size(params.n)[1] if contact_sheet else 0
    if decoded + sheet > max_megapixels * 1e6:
        raise ProblemError(422, "Too many pixels",
                           f"{params.n} frames of up to {params.max_side}x{params.max_side} pixels"
                           f"{' and their contact sheet' if sheet else ''} are {(decoded + sheet) / 1e6:.0f} "
                           f"megapixels; this server decodes at most {max_megapixels:g} per request "
                           "(FRAMEJUDGE_MAX_FRAME_MEGAPIXELS): ask for fewer frames (sampler.n) or a smaller "
                           "sampler.max_side")
    return sheet or decoded


def check_frames_response(pixels: int, quality: int, max_mb: float) -> None:
    """422 if images of `pixels` in all, as JPEG data URLs at `quality`, would likely pass `max_mb`."""
    import numpy as np

    estimate = pixels * float(np.interp(quality, JPEG_QUALITIES, JPEG_BYTES_PER_PIXEL)) * DATA_URL_OVERHEAD
    if estimate > max_mb * 1024**2:
        raise ProblemError(422, "Response too large", too_large(f"about {estimate / 1024**2:.0f} MiB", quality, max_mb))


def too_large(size: str, quality: int, max_mb: float) -> str:
    return (f"these frames would be {size} of JPEG at quality {quality}; this server answers with at most "
            f"{max_mb:g} MiB (FRAMEJUDGE_MAX_FRAMES_RESPONSE_MB): ask for fewer frames, a smaller max_side, a "
            "lower quality or a contact sheet")
