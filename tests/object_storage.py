"""Object storage on loopback for the videos read from s3:// and gs:// URLs: moto's S3 server (every
request it answers noted with the process that sent it, found from the connection's port) and
gcp-storage-emulator for Google Cloud Storage, reached through Google's application default
credentials (a credentials file whose token endpoint is a loopback server answering as Google's OAuth
token endpoint does).

Each server names itself as the operator's endpoint when it starts (FRAMEJUDGE_S3_ENDPOINT,
FRAMEJUDGE_GCS_ENDPOINT: plain http on loopback): an item's URL is only s3://bucket/key.

The credentials are set for the whole session (conftest.py's `_object_storage_credentials`), before any
decoding process or Ray cluster starts, so that every process reading an object has them."""

from __future__ import annotations

import json
import os
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

BUCKET = "videos"


def set_credentials(folder: Path) -> None:
    """Test credentials for pyarrow's S3 chain (moto takes any), no instance-metadata lookups, and a
    Google application default credentials file (written by the gcs fixture) in `folder`."""
    os.environ.update({"AWS_ACCESS_KEY_ID": "framejudge-test", "AWS_SECRET_ACCESS_KEY": "framejudge-test-secret",
                       "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": "us-east-1",
                       "GOOGLE_APPLICATION_CREDENTIALS": str(folder / "adc.json")})


@dataclass
class Request:
    method: str
    path: str
    pid: int | None  # the process that sent it
    parent: int | None  # and the process that started that one


class S3:
    """moto's S3 server on loopback with one bucket; `requests` lists what it answered."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.requests: list[Request] = []
        self._lock = threading.Lock()
        owner = self

        class Counted(ThreadedMotoServer):
            def _server_entry(self) -> None:
                from moto.moto_server.werkzeug_app import (DomainDispatcherApplication, MotoRequestHandler,
                                                           create_backend_app)
                from werkzeug.serving import make_server

                app = DomainDispatcherApplication(create_backend_app)
                self._server = make_server(self._ip_address, self._port, owner._noting(app), True,
                                           request_handler=MotoRequestHandler)
                self._server_ready_event.set()
                self._server.serve_forever()

        self.server = Counted(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        self.host, self.port = self.server.get_host_and_port()
        import boto3

        self.client = boto3.client("s3", endpoint_url=f"http://{self.host}:{self.port}", region_name="us-east-1")
        self.client.create_bucket(Bucket=BUCKET)
        self.requests.clear()
        # the operator's endpoint (an item's URL names only the bucket and key): plain http on loopback
        self.endpoint = f"http://{self.host}:{self.port}"
        os.environ["FRAMEJUDGE_S3_ENDPOINT"] = self.endpoint

    def _noting(self, app: Any) -> Any:
        def noted(environ: dict[str, Any], start_response: Any) -> Any:
            pid, parent = _client_pid(int(environ.get("REMOTE_PORT") or 0), self.port)
            with self._lock:
                self.requests.append(Request(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), pid, parent))
            return app(environ, start_response)
        return noted

    def url(self, key: str, bucket: str = BUCKET) -> str:
        return f"s3://{bucket}/{key}"

    def put(self, key: str, data: bytes) -> str:
        self.client.put_object(Bucket=BUCKET, Key=key, Body=data)
        return self.url(key)

    def reads(self, key: str) -> list[Request]:
        """The GETs of an object's bytes (a HEAD reads its metadata only)."""
        with self._lock:
            return [r for r in self.requests if r.method == "GET" and r.path == f"/{BUCKET}/{key}"]

    def stop(self) -> None:
        self.server.stop()
        os.environ.pop("FRAMEJUDGE_S3_ENDPOINT", None)


def _client_pid(client_port: int, server_port: int) -> tuple[int | None, int | None]:
    """The process on this machine holding the connection from `client_port` to `server_port`, and its
    parent."""
    import psutil

    for c in psutil.net_connections("tcp"):
        if c.laddr and c.raddr and c.laddr.port == client_port and c.raddr.port == server_port and c.pid:
            try:
                return int(c.pid), psutil.Process(c.pid).ppid()
            except psutil.Error:
                return int(c.pid), None
    return None, None


class _Token(BaseHTTPRequestHandler):
    """Google's OAuth token endpoint, as far as a refresh-token grant goes."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"access_token": "ya29.framejudge-test", "expires_in": 3600, "token_type": "Bearer"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class GCS:
    """gcp-storage-emulator on loopback with one bucket, and the token endpoint of its credentials."""

    def __init__(self) -> None:
        from gcp_storage_emulator.server import create_server

        self.tokens = ThreadingHTTPServer(("127.0.0.1", 0), _Token)
        threading.Thread(target=self.tokens.serve_forever, daemon=True).start()
        Path(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]).write_text(json.dumps({
            "type": "authorized_user", "client_id": "framejudge-test", "client_secret": "test", "refresh_token": "test",
            "token_uri": f"http://127.0.0.1:{self.tokens.server_address[1]}/token"}))
        with socket.socket() as s:  # the emulator takes a port, not 0
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = create_server("127.0.0.1", self.port, in_memory=True, default_bucket=BUCKET)
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        os.environ["FRAMEJUDGE_GCS_ENDPOINT"] = self.endpoint

    def url(self, key: str, bucket: str = BUCKET) -> str:
        return f"gs://{bucket}/{key}"

    def put(self, key: str, data: bytes) -> str:
        import pyarrow.fs

        fs = pyarrow.fs.GcsFileSystem(endpoint_override=f"127.0.0.1:{self.port}", scheme="http")
        with fs.open_output_stream(f"{BUCKET}/{key}") as f:
            f.write(data)
        return self.url(key)

    def stop(self) -> None:
        self.server.stop()
        os.environ.pop("FRAMEJUDGE_GCS_ENDPOINT", None)
        self.tokens.shutdown()
        self.tokens.server_close()


@pytest.fixture(scope="session")
def s3():
    pytest.importorskip("moto", reason="the object storage tests need moto (the test extra)")
    pytest.importorskip("pyarrow", reason="the object storage tests need the storage extra")
    server = S3()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gcs():
    pytest.importorskip("gcp_storage_emulator", reason="the object storage tests need gcp-storage-emulator "
                                                       "(the test extra)")
    pytest.importorskip("pyarrow", reason="the object storage tests need the storage extra")
    server = GCS()
    yield server
    server.stop()
