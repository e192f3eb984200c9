"""A real PostgreSQL server for the database tests (service, queue), stopped at the end of the
session (bench/postgres.py starts it). Tests that need it skip with the reason where PostgreSQL
or its Python driver is not installed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.postgres import PostgresServer, bin_dir


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    found = bin_dir()
    if found is None:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql); .ci/run installs it")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("the psycopg driver is not installed (pip install -e '.[postgres]')")
    server = PostgresServer(found)
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test using this runs on a SQLite file and on a real PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'service.sqlite'}"
    return request.getfixturevalue("postgres").new_database()
