"""A throwaway PostgreSQL server for the benchmarks and the tests: Debian's binaries, a cluster in a
temporary folder, listening on loopback only (run as the 'postgres' user when root)."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="framejudge-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        # PostgreSQL refuses to run as root: run it as the 'postgres' system user then.
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", "framejudge", "--auth=trust", "-E", "UTF8", "--no-sync")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60", "start",
                  "-o", f"-h 127.0.0.1 -p {self.port} -k {self.root} -F")

    def _run(self, tool: str, *args: str) -> None:
        result = subprocess.run([*self.as_user, str(self.bin / tool), *args], capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"{tool} failed: {result.stderr.strip() or result.stdout.strip()}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://framejudge@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        import psycopg

        name = "t_" + secrets.token_hex(6)
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=framejudge dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def restart(self) -> None:
        """Stop the server (fast: open connections are cut) and start it again on the same port."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-m", "fast", "-w", "-t", "60",
                  "restart", "-o", f"-h 127.0.0.1 -p {self.port} -k {self.root} -F")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
