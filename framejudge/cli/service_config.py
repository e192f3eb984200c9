"""The HTTP service's settings and database, for the commands that run or manage the service
(serve, worker, keys, uploads): read from the same FRAMEJUDGE_* variables as the service."""

from __future__ import annotations

from .console import fail


def service_settings():
    """The service's settings from the environment; a bad variable is an error line, exit 2."""
    from ..service.settings import Settings

    return Settings.from_env()


def service_database(url: str):
    """The service's database, created or brought up to date; one that cannot be opened is an
    error line naming FRAMEJUDGE_SERVICE_DB, exit 2."""
    from ..db import open_problem, shown_url
    from ..service.store import engine_for

    try:
        return engine_for(url)
    except Exception as exc:
        fail(f"FRAMEJUDGE_SERVICE_DB: cannot open the database {shown_url(url)}: {open_problem(exc)}")
