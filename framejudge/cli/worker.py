"""framejudge worker: grades the service's queued job items, with no HTTP."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..logs import configure as configure_logs
from .console import err
from .options import LogJson, LogLevel, LogLevelOption
from .outputs import check_cache_folder
from .service_config import service_database, service_settings


def worker(
    max_in_flight: Annotated[Optional[int], typer.Option(min=1, help="items graded at once, at most (default: "
                                                                     "FRAMEJUDGE_WORKER_IN_FLIGHT, else 256)")] = None,
    log_level: LogLevelOption = LogLevel.warning,
    log_json: LogJson = False,
) -> None:
    """Grade queued job items from the service's database, with no HTTP (run any number, on any
    machine that reaches the database and the videos). Same settings as `serve`
    (FRAMEJUDGE_SERVICE_DB, FRAMEJUDGE_JUDGES_FILE, FRAMEJUDGE_LEASE_SECONDS, ...). SIGTERM or
    Ctrl-C: finishes the items in hand, hands back the rest, exits."""
    import asyncio
    import contextlib
    import signal
    import threading
    from collections.abc import Callable

    # A stop asked for before the loop is up (the imports and set-up below take seconds), while it
    # runs or while it shuts down is the same request: finish, hand back what is held, exit 0. The
    # handler is the process's own for the worker's whole life: handing over to the loop's and
    # back would pass through the defaults, and a signal in that moment would kill the process.
    stopping = threading.Event()
    wake: list[Callable[[], object]] = []  # while the loop runs: tell it

    def stop_asked(*_: object) -> None:
        stopping.set()
        for tell in wake:
            with contextlib.suppress(RuntimeError):  # the loop has just closed
                tell()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop_asked)

    from ..frame_sampler import IsolatedSampler
    from ..runner.decode import SharedDecodes
    from ..runner.graders import GraderCache
    from ..runner.judges import Judges, load_judges_file
    from ..db import shown_url
    from ..runner.worker import QueueWorker

    configure_logs(log_level.value, log_json)
    settings = service_settings()
    configs = load_judges_file(settings.judges_file) if settings.judges_file else []
    engine = service_database(settings.database_url)
    check_cache_folder()
    decoder = IsolatedSampler(workers=settings.decode_workers, timeout_s=settings.decode_timeout_s,
                              max_memory_mb=settings.decode_memory_mb)
    decoder.start()  # in the main thread: born deaf to the terminal's Ctrl-C, which this process handles
    graders = GraderCache(SharedDecodes(decoder.sample), Judges(configs, api_base=settings.api_base),
                          cut=decoder.cut)
    queue_worker = QueueWorker(engine, graders, lease_s=settings.lease_s,
                               max_in_flight=max_in_flight or settings.worker_max_in_flight)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        wake.append(lambda: loop.call_soon_threadsafe(stop.set))
        if stopping.is_set():
            stop.set()
        err.print(f"worker {queue_worker.name} grading from {shown_url(settings.database_url)}", highlight=False)
        try:
            await queue_worker.run(stop)
        finally:
            wake.clear()

    try:
        asyncio.run(main())
    finally:
        decoder.close()
    err.print(f"worker {queue_worker.name} stopped: {queue_worker.graded} item(s) graded", highlight=False)
