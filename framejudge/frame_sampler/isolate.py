"""Sampling in worker processes that can be killed: a wall-clock limit per video and a memory
cap per worker.

FFmpeg runs C code on untrusted bytes. The header checks reject what can be recognised up front
(FIFOs, pixel bombs, absurd aspect ratios), but a file that passes them can still make a decoder
spin or allocate without bound, and in the calling process nothing can interrupt it. In a worker
both are survivable: past the time limit the worker is killed; past the memory cap (resident
memory, watched every 20 ms, with an address-space limit behind it for allocations faster than
that) it exits; the caller gets a specific FrameSamplerError, and a fresh worker takes the next
video. Workers are started when first needed (spawned, not forked: the caller may hold threads
and locks) and reused, so an isolated call costs one round trip of pickled frames.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import resource
import signal
import sys
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from concurrent.futures import InvalidStateError, TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

import pebble

from ..env import cache_off
from ..errors import FramejudgeError
from ..schema import SamplerParams
from .cache import FrameCache, default_cache_dir
from .clip import MAX_CLIP_BYTES, Clip, cut_clip
from .errors import DecodeTimedOut, DecoderDied, FrameSamplerError
from .probe import Limits
from .sampler import SampleResult, SamplingWarning, make_params, sample_frames, video_duration

_CACHES: dict[str, FrameCache] = {}
RECYCLE_EXIT = 75  # a worker whose allocations failed exits with this before its next task
OVER_MEMORY_EXIT = 76  # a worker past its resident-memory cap exits with this at once
UNGUARDED_EXIT = 77  # a worker importing a script that would make an IsolatedSampler again exits with this
_MEMORY_TROUBLE = ("Cannot allocate memory", "Resource temporarily unavailable", "out of memory")
_spent = False  # in a worker: an allocation failed here, so its heap is not to be trusted


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # no /proc: the peak, which is at least the current
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def _watch(limit: int) -> None:
    while True:
        if _resident_bytes() > limit:
            os._exit(OVER_MEMORY_EXIT)
        time.sleep(0.02)


def _start_worker(max_bytes: int | None) -> None:
    """Worker initializer: Ctrl-C is the caller's to handle (a terminal sends it to the whole
    process group; a worker dying of it would turn the decode in hand into an error record), and
    the memory cap."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _cap_memory(max_bytes)


def _cap_memory(max_bytes: int | None) -> None:
    """A watchdog on resident memory, and an address-space limit (generous: decoders reserve far
    more than they touch) so that even a faster runaway fails here."""
    if max_bytes:
        backstop = max(4 * max_bytes, max_bytes + 2 * 1024**3)
        resource.setrlimit(resource.RLIMIT_AS, (backstop, backstop))
        threading.Thread(target=_watch, args=(max_bytes,), name="memory-watch", daemon=True).start()


T = TypeVar("T")


def _guarded(work: Callable[[], T]) -> T:
    """Run one decoding task in a worker: a worker that ran out of memory before exits instead (the
    caller sees the exit code and hands the task to a fresh worker), and one whose task ran out of
    memory now is marked to exit before its next."""
    global _spent
    if _spent:
        os._exit(RECYCLE_EXIT)
    try:
        return work()
    except MemoryError:
        _spent = True
        raise
    except FrameSamplerError as exc:
        _spent = any(sign in exc.message for sign in _MEMORY_TROUBLE)
        raise


def _sample_in_worker(path: str, params: SamplerParams, cache_dir: str | None, limits: Limits) -> SampleResult:
    cache = None
    if cache_dir is not None:
        cache = _CACHES.get(cache_dir) or _CACHES.setdefault(cache_dir, FrameCache(cache_dir))

    def sample() -> SampleResult:
        with warnings.catch_warnings():  # they travel on the result; the caller warns, once
            warnings.simplefilter("ignore", SamplingWarning)
            return sample_frames(path, params, cache=cache, limits=limits)

    return _guarded(sample)


def _duration_in_worker(path: str, limits: Limits) -> float:
    return _guarded(lambda: video_duration(path, limits))


def _cut_in_worker(path: str, params: SamplerParams, fps: float, max_bytes: int, limits: Limits) -> Clip:
    return _guarded(lambda: cut_clip(path, params, fps, max_bytes, limits=limits))


class DecodingStopped(RuntimeError):
    """The sampler was closed while a call waited on its decoding processes: nothing is wrong with
    the video; the call's work was given up (a run being stopped)."""


class _Recycled(Exception):
    """The worker had run out of memory on an earlier video and exited instead of taking this one."""


class UnguardedScript(FramejudgeError, RuntimeError):
    """The decoding processes could not start: each imports the caller's script, whose code makes
    an IsolatedSampler without an `if __name__ == "__main__":` guard."""

    code = "unguarded_script"


def _marker(parent_pid: int) -> str:
    """A file a decoding process leaves for the caller `parent_pid` to say why it did not start."""
    return os.path.join(tempfile.gettempdir(), f"framejudge-unguarded-{parent_pid}")


def _starting_a_worker() -> bool:
    """Whether this is a decoding process still importing the caller's script (as spawning does):
    multiprocessing's own test for a process started before its parent's script was guarded."""
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def not_while_starting_a_worker() -> None:
    """Exit at once if this is a decoding process importing the caller's script, which calls for
    decoding processes (IsolatedSampler, framejudge.grade) without an `if __name__ == "__main__":`
    guard; the caller raises UnguardedScript, saying so. Called before any work: the script's
    grading must not run again in each decoding process."""
    if _starting_a_worker():
        with open(_marker(os.getppid()), "w"):
            pass
        os._exit(UNGUARDED_EXIT)


class IsolatedSampler:
    """`sample_frames` with the decoding in killable worker processes.

    `timeout_s` bounds each video's sampling (wall clock, in the worker); `max_memory_mb` caps
    each worker's resident memory (None: no cap); `cache_dir` is the frame cache the workers share
    (None: no cache; the default: the user cache folder or FRAMEJUDGE_CACHE_DIR).
    """

    def __init__(self, workers: int = 1, timeout_s: float = 120.0, max_memory_mb: int | None = 4096,
                 cache_dir: str | os.PathLike[str] | None = "default") -> None:
        not_while_starting_a_worker()
        if workers < 1 or timeout_s <= 0:
            raise ValueError("workers must be >= 1 and timeout_s > 0")
        self.timeout_s = timeout_s
        self.max_memory_mb = max_memory_mb
        if cache_dir == "default":  # FRAMEJUDGE_NO_CACHE turns it off, as for sample_frames
            cache_dir = None if cache_off() else default_cache_dir()
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        self.workers = workers
        self._pool: pebble.ProcessPool | None = None
        self._pending: set[Any] = set()  # futures handed out and not yet done
        self._abandoned: weakref.WeakSet[Any] = weakref.WeakSet()  # those a close() gave up
        self._lock = threading.Lock()
        self._closing = threading.Lock()
        self._final = False  # closed for good: no later call starts workers again

    def _active_pool(self) -> pebble.ProcessPool:
        """The worker pool, started on first use (and again after close, unless for good). Under self._lock."""
        if self._final:
            raise DecodingStopped("the decoding processes were stopped (closed for good)")
        if self._pool is None or not self._pool.active:
            cap = self.max_memory_mb * 1024**2 if self.max_memory_mb else None
            self._pool = pebble.ProcessPool(max_workers=self.workers, initializer=_start_worker, initargs=(cap,),
                                            context=multiprocessing.get_context("spawn"))
        return self._pool

    def _schedule(self, task: Any, args: tuple = (), timeout: float | None = None) -> Any:
        """Hand `task` to a decoding process. Scheduling and close() exclude each other, and close()
        ends every future it leaves behind, so that no caller waits for ever on a pool that was
        stopped under it (a stopped pool resolves nothing it had queued)."""
        with self._lock:
            future = self._active_pool().schedule(task, args=args, timeout=timeout)
            self._pending.add(future)
        future.add_done_callback(lambda done: self._pending.discard(done))  # the set of now, not of then
        return future

    def start(self) -> None:
        """Start the decoding processes now rather than on first use. Called from the main thread,
        they are born with Ctrl-C ignored: a terminal sends Ctrl-C to the whole process group, and a
        process still importing (a second or two) would die of it, printing a traceback, before
        its initializer could ignore it. The caller ignores Ctrl-C only while the processes are
        launched (milliseconds each); they inherit that and keep it."""
        on_main = threading.current_thread() is threading.main_thread()  # (only it can set a handler)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if on_main else None
        try:
            self._schedule(os.getpid)  # starts the pool: its processes are launched in this call
        finally:  # (None: a handler not set from Python, which cannot be put back; the default then)
            if on_main:
                signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)

    def sample(self, path: str | os.PathLike[str], params: SamplerParams | None = None, *,
               limits: Limits = Limits(), cache: bool = True, **overrides: Any) -> SampleResult:
        """Like `sample_frames` (`cache=False` skips the frame cache); also raises DecodeTimedOut
        and DecoderDied."""
        chosen = make_params(params, **overrides)
        cache_dir = self.cache_dir if cache else None
        result: SampleResult = self._run(_sample_in_worker, (str(path), chosen, cache_dir, limits), path)
        for w in result.warnings:  # as sample_frames would have warned in this process
            warnings.warn(f"{path}: {w}", SamplingWarning, stacklevel=2)
        return result

    def cut(self, path: str | os.PathLike[str], params: SamplerParams, fps: float = 1.0,
            max_bytes: int = MAX_CLIP_BYTES, *, limits: Limits = Limits()) -> Clip:
        """Like `cut_clip` (the clip of a turn's window), in a decoding process under the same time
        limit and memory cap; also raises DecodeTimedOut and DecoderDied."""
        return self._run(_cut_in_worker, (str(path), params, fps, max_bytes, limits), path)

    def duration(self, path: str | os.PathLike[str], *, limits: Limits = Limits()) -> float:
        """Like `video_duration` (a demux scan of the whole file, nothing decoded), in a decoding process
        under the same time limit and memory cap: the file is untrusted however little is read of it;
        also raises DecodeTimedOut and DecoderDied."""
        return float(self._run(_duration_in_worker, (str(path), limits), path))

    def _run(self, task: Any, args: tuple, path: str | os.PathLike[str]) -> Any:
        for attempt in range(2):
            future = self._schedule(task, args, self.timeout_s)
            try:
                return self._result(future, path)
            except _Recycled:
                if attempt:
                    raise DecoderDied("two decoding processes in a row were out of memory", str(path)) from None
        raise AssertionError("unreachable")

    def _result(self, future: Any, path: str | os.PathLike[str]) -> Any:
        try:
            return self._outcome(future, path)
        except Exception:
            if future in self._abandoned:  # whatever the stopped pool made of it: given up, nothing wrong with the video
                raise DecodingStopped(f"{path}: the decoding processes were stopped (closed) before it was "
                                      "decoded") from None
            raise

    def _outcome(self, future: Any, path: str | os.PathLike[str]) -> Any:
        try:
            return future.result()
        except FutureTimeout:
            raise DecodeTimedOut(f"sampling took longer than {self.timeout_s:g} s; the decoding process was "
                                 "stopped", str(path)) from None
        except pebble.ProcessExpired as exc:
            if exc.exitcode == RECYCLE_EXIT:
                raise _Recycled from None
            if exc.exitcode == OVER_MEMORY_EXIT:
                raise DecoderDied(f"decoding went over the memory cap of {self.max_memory_mb} MB; the decoding "
                                  "process was stopped", str(path)) from None
            raise DecoderDied(f"the decoding process died (exit code {exc.exitcode}){self._cap_note()}",
                              str(path)) from None
        except MemoryError:
            raise DecoderDied(f"decoding ran out of memory{self._cap_note()}", str(path)) from None
        except BrokenProcessPool:
            marker = _marker(os.getpid())
            if not os.path.exists(marker):
                raise
            os.remove(marker)
            self.close()
            raise UnguardedScript(
                "the decoding processes could not start: each one imports your script, which makes an "
                "IsolatedSampler again; put the code that uses it under `if __name__ == \"__main__\":`") from None

    def _cap_note(self) -> str:
        return f"; each decoding process is capped at {self.max_memory_mb} MB" if self.max_memory_mb else ""

    def close(self, *, final: bool = False) -> None:
        """Stop the workers (a later call starts new ones; with `final`, a later call raises
        DecodingStopped instead: a run that has ended, whose threads may still be about to ask). A
        call waiting on them raises DecodingStopped. A close while another is under way (a run
        stopping them from a thread, then its shutdown) waits for it: once close returns, they are
        stopped."""
        with self._closing:
            with self._lock:
                self._final = self._final or final
                pool, self._pool = self._pool, None
                pending, self._pending = self._pending, set()
                self._abandoned.update(pending)
            if pool is not None:
                pool.stop()
                pool.join()
            for future in list(pending):
                with contextlib.suppress(InvalidStateError):  # it ended meanwhile
                    future.set_exception(DecodingStopped("the decoding processes were stopped"))

    def __enter__(self) -> IsolatedSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
