"""A listener on loopback (or another address) that stands where nothing should connect: the address an
attacker's URL names, the target of a redirect that must not be followed. It records what each
connection sends (up to the end of its headers), answers 403 and closes; `everything()` is what it was
sent before now, read only once every earlier connection has been handled, so an empty list means that
nothing connected, not that nothing had connected yet."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest


class Listener:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._seen = threading.Condition()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                        data += chunk
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass
            with self._seen:
                self.received.append(data)
                self._seen.notify_all()

    def everything(self) -> list[bytes]:
        """What was received before now: a last connection of our own is accepted after any earlier one
        (the queue is in order), so once it is recorded nothing sent before it is still on the way."""
        with socket.create_connection(("127.0.0.1", self.port)) as own:
            own.sendall(b"SENTINEL\r\n\r\n")
            own.recv(100)
        with self._seen:
            self._seen.wait_for(lambda: self.received and self.received[-1] == b"SENTINEL\r\n\r\n", timeout=30)
            return self.received[:-1]

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture()
def listener() -> Iterator[Listener]:
    with Listener() as server:
        yield server
