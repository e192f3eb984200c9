"""framejudge serve: the HTTP API, bound before it starts and stopped gracefully."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import typer

from ..logs import configure as configure_logs
from .console import err, fail, flagged
from .options import LogJson, LogLevel, LogLevelOption
from .outputs import check_cache_folder
from .service_config import service_database, service_settings


def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 8000,
    log_level: LogLevelOption = LogLevel.warning,
    log_json: LogJson = False,
) -> None:
    """Run the HTTP API (settings from FRAMEJUDGE_SERVICE_DB, FRAMEJUDGE_MEDIA_ROOT, ...)."""
    import socket

    import uvicorn

    from ..db import shown_url
    from ..service.app import create_app
    from ..service.store import key_state, list_keys

    configure_logs(log_level.value, log_json)
    Serving = _serving()
    if not 0 <= port <= 65535:
        fail(f"--port: {port} is not a TCP port (0 to 65535)")
    settings = service_settings()
    engine = service_database(settings.database_url)
    check_cache_folder()
    app = create_app(settings)
    try:  # bound here, so an address in use or a bad host is an error line before anything starts
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((host, port), family=family)
    except OSError as exc:
        fail(f"--host/--port: cannot listen on {host} port {port}: {exc.strerror or exc}")
    bound_host, bound_port = sock.getsockname()[:2]
    url = f"http://{f'[{bound_host}]' if ':' in bound_host else bound_host}:{bound_port}"
    active = sum(key_state(k) == "active" for k in list_keys(engine))
    err.print(f"framejudge serve: {url} (API docs at {url}/docs)", highlight=False, soft_wrap=True)
    graded_by = ("here and by any `framejudge worker`" if settings.run_worker else
                 "by `framejudge worker` processes only (FRAMEJUDGE_SERVICE_WORKER=0)")
    err.print(f"database: {shown_url(settings.database_url)}; jobs are graded {graded_by}", highlight=False,
              soft_wrap=True)
    if active:
        err.print(f"API keys: {active} active (`framejudge keys list`)", highlight=False, soft_wrap=True)
    else:
        err.print(flagged("note:", "yellow", "no active API key: requests that need one are refused (401); make "
                          "one with `framejudge keys create --scope grade` (same FRAMEJUDGE_SERVICE_DB)"),
                  highlight=False, soft_wrap=True)
    err.print("Ctrl-C or SIGTERM stops it (the items being graded are finished first)", highlight=False)
    # forwarded headers are believed only from FRAMEJUDGE_TRUSTED_PROXIES, by the app itself
    Serving(uvicorn.Config(app, log_level="warning", proxy_headers=False)).run(sockets=[sock])
    err.print(f"framejudge serve: stopped ({url})", highlight=False, soft_wrap=True)


def _serving() -> type:
    import contextlib
    import signal

    import uvicorn

    class Serving(uvicorn.Server):
        """uvicorn's server, stopping gracefully on SIGINT or SIGTERM as it does, then returning
        (uvicorn raises the signal again once stopped, which ends the process before `serve` can
        say that it stopped)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Serving
