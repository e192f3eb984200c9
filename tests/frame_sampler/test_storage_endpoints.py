"""Object storage's endpoint, scheme, region and credentials are the operator's, never an item's: an
item naming `?endpoint_override=...` is refused (with its file and line when the items are loaded, and
again where the object is read) and the machine's credentials reach no listener; the operator's own
endpoint is checked before any request (plain http only on loopback, no private or link-local address
unless allowed). The attacker is a plain loopback listener that records every byte it receives."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from framejudge.frame_sampler import sample_frames
from framejudge.frame_sampler.objects import (ObjectReadFailed, StorageSettingsError, UnsupportedURL, stat_object,
                                              storage_endpoint)
from tests.loopback import Listener, listener  # noqa: F401 (a fixture)

pytest.importorskip("pyarrow", reason="videos in object storage need the storage extra")
ROOT = Path(__file__).resolve().parents[2]
TURN = {"question": "How many people?", "golden": "2 people.", "response_a": "There are 2 people."}
SESSION_TOKEN = "FwoGZXIvYXdzEXAMPLE-session-token"


@pytest.fixture()
def gcs_credentials(gcs):
    """Google application default credentials that mint a token (the gcs fixture's token endpoint)."""
    return os.environ["GOOGLE_APPLICATION_CREDENTIALS"]


def _items(path: Path, videos: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": f"i{k}", "video": v, "turns": [TURN]}) + "\n"
                            for k, v in enumerate(videos)))
    return path


def _grade(items: Path, out: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "AWS_SESSION_TOKEN": SESSION_TOKEN, **env}
    return subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out), "--yes",
                           "--no-cache", "-n", "4"], capture_output=True, text=True, timeout=300, env=full)


def _attacks(port: int) -> list[str]:
    return [f"s3://corp-private/clip.mp4?endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1",
            f"gs://corp-private/clip.mp4?endpoint_override=127.0.0.1:{port}&scheme=http",
            f"s3://corp-private/clip.mp4#?endpoint_override=127.0.0.1:{port}",
            f"s3://127.0.0.1:{port}/corp-private/clip.mp4",
            f"gs://corp-private:{port}/clip.mp4"]


def test_an_item_naming_an_endpoint_is_refused_with_its_line_and_no_credential_leaves(
        listener, gcs_credentials, tmp_path):
    """AWS credentials with a session token and a Google credential in the environment: each item that
    names an endpoint (query, fragment, a host and port) is refused before anything is graded, the
    listener receives nothing at all."""
    for attack in _attacks(listener.port):
        items = _items(tmp_path / "items.jsonl", ["s3://videos/fine.mp4", attack])
        proc = _grade(items, tmp_path / "v.jsonl")
        assert proc.returncode == 2 and proc.stderr.startswith("error:"), (attack, proc.stderr)
        assert "items.jsonl:2: video " in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert SESSION_TOKEN not in proc.stderr and f"={listener.port}" not in proc.stderr  # no value echoed
        assert not (tmp_path / "v.jsonl").exists()
    assert listener.everything() == []


def test_the_python_api_and_the_reader_refuse_an_item_naming_an_endpoint(listener, gcs_credentials, monkeypatch):
    """grade() with items in memory (`items[0]`), and where an object is read (a Grader, a Ray actor
    reach it without load_items): refused, and the listener receives nothing."""
    import framejudge

    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    for attack in _attacks(listener.port):
        with pytest.raises(framejudge.FramejudgeError, match=r"^items\[0\]: video .*names a bucket and an object|"
                                                             r"^items\[0\]: video .*is not a bucket name"):
            framejudge.grade([{"id": "a", "video": attack, "turns": [TURN]}])
        with pytest.raises(UnsupportedURL):
            stat_object(attack)
        with pytest.raises(UnsupportedURL):
            sample_frames(attack, n=2)
    assert listener.everything() == []


def _other_address() -> str | None:
    """An IPv4 address of this machine that is not loopback."""
    import psutil

    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


def test_an_operator_endpoint_over_plain_http_off_loopback_is_refused_before_any_request(gcs_credentials, tmp_path):
    """Even allowed onto private addresses, credentials never go over plain http to another machine:
    the run stops at once (exit 2) and the listener on that address receives nothing."""
    address = _other_address()
    if address is None:
        pytest.skip("this machine has no address besides loopback")
    far = Listener("0.0.0.0")
    try:
        items = _items(tmp_path / "items.jsonl", ["s3://videos/a.mp4"])
        for variable, video in (("FRAMEJUDGE_S3_ENDPOINT", "s3://videos/a.mp4"),
                                ("FRAMEJUDGE_GCS_ENDPOINT", "gs://videos/a.mp4")):
            items = _items(tmp_path / "items.jsonl", [video])
            proc = _grade(items, tmp_path / "v.jsonl", **{variable: f"http://{address}:{far.port}",
                                                         "FRAMEJUDGE_STORAGE_ALLOW_PRIVATE": "1"})
            assert proc.returncode == 2 and proc.stderr.startswith("error:"), proc.stderr
            assert f"{variable}='http://{address}:{far.port}': credentials are never sent over plain http" \
                in proc.stderr, proc.stderr
            # not allowed onto private addresses: https is refused for the address alone
            proc = _grade(items, tmp_path / "v.jsonl", **{variable: f"https://{address}:{far.port}"})
            assert proc.returncode == 2 and "resolves to a non-public address" in proc.stderr, proc.stderr
            assert "FRAMEJUDGE_STORAGE_ALLOW_PRIVATE=1" in proc.stderr
        assert not (tmp_path / "v.jsonl").exists()
        assert far.everything() == []
    finally:
        far.close()


@pytest.mark.parametrize("value, words", [
    ("https://169.254.169.254", "resolves to a non-public address (169.254.169.254)"),
    ("https://10.0.0.8:9000", "resolves to a non-public address (10.0.0.8)"),
    ("http://169.254.169.254", "credentials are never sent over plain http off this machine (169.254.169.254 is "
                               "169.254.169.254)"),
    ("127.0.0.1:9000", "give the endpoint as https://host[:port]"),
    ("https://user:pw@s3.example.com", "give the endpoint as https://host[:port]"),
    ("https://s3.example.com/bucket", "give the endpoint as https://host[:port]"),
    ("https://s3.example.com?x=1", "give the endpoint as https://host[:port]"),
    ("ftp://127.0.0.1", "give the endpoint as https://host[:port]"),
    ("http://127.0.0.1:99999", "the port must be a number from 1 to 65535"),
])
def test_operator_endpoints_that_are_not_used_are_refused(monkeypatch, value, words):
    monkeypatch.setenv("FRAMEJUDGE_S3_ENDPOINT", value)
    with pytest.raises(StorageSettingsError, match=r"^FRAMEJUDGE_S3_ENDPOINT=") as info:
        storage_endpoint("s3")
    assert words in str(info.value) and "pw" not in str(info.value).replace("https://user:pw@", "")
    # where an object is read, the same refusal is the turn's error, before any request
    with pytest.raises(ObjectReadFailed, match="FRAMEJUDGE_S3_ENDPOINT="):
        stat_object("s3://videos/a.mp4")


@pytest.mark.parametrize("value, allow_private, shown", [
    ("http://127.0.0.1:9000", "0", "http://127.0.0.1:9000"),
    ("http://localhost:9000/", "0", "http://localhost:9000"),
    ("http://[::1]:9000", "0", "http://[::1]:9000"),
    ("https://10.0.0.8:9000", "1", "https://10.0.0.8:9000"),
    ("https://8.8.8.8", "0", "https://8.8.8.8:443"),
])
def test_operator_endpoints_that_are_allowed(monkeypatch, value, allow_private, shown):
    monkeypatch.setenv("FRAMEJUDGE_GCS_ENDPOINT", value)
    monkeypatch.setenv("FRAMEJUDGE_STORAGE_ALLOW_PRIVATE", allow_private)
    if "localhost" in value and not all(a[4][0] in ("127.0.0.1", "::1") for a in socket.getaddrinfo("localhost", 1)):
        pytest.skip("localhost resolves off loopback here")
    assert str(storage_endpoint("gcs")) == shown


def test_the_operator_endpoint_reads_objects_and_the_url_stays_bucket_and_key(s3, clips, tmp_path):
    """The other side: with the operator's endpoint (moto on loopback) an s3:// item is graded."""
    url = s3.put("operator/h264.mp4", clips["h264"].read_bytes())
    assert url == "s3://videos/operator/h264.mp4"
    items = _items(tmp_path / "items.jsonl", [url])
    proc = _grade(items, tmp_path / "v.jsonl", FRAMEJUDGE_S3_ENDPOINT=s3.endpoint)
    assert proc.returncode == 0, proc.stderr
    [record] = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert record["record"] == "verdict" and record["provenance"]["video"] == url
    assert any(r.path == "/videos/operator/h264.mp4" and r.method == "HEAD" for r in s3.requests)


def test_the_region_and_endpoint_are_the_operators(s3, monkeypatch):
    """FRAMEJUDGE_S3_REGION and FRAMEJUDGE_S3_ENDPOINT make the file system an object is read with."""
    from framejudge.frame_sampler.objects import _filesystem

    monkeypatch.setenv("FRAMEJUDGE_S3_REGION", "eu-west-3")
    fs, path, origin = _filesystem("s3://videos/some/key.mp4")
    assert (fs.region, path, origin) == ("eu-west-3", "videos/some/key.mp4", s3.endpoint)
