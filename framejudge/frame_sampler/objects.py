"""Videos in object storage: `s3://bucket/key` and `gs://bucket/key` URLs, read with pyarrow.fs (the
file-system library Ray uses), an optional extra (`pip install '.[storage]'`).

A URL is read by the process that decodes it: the object is streamed into a node-local copy (its
SHA-256 computed on the way) and the copy is decoded exactly as a path is, so the frames, the video's
hash and the frame cache are those of the same bytes given as a file. Copies are kept in a
size-bounded folder beside the frame cache (`$FRAMEJUDGE_CACHE_DIR/objects`), named by the URL and
the object's version as its metadata gives it (size and modification time): a second run reads the
metadata again (one HEAD) and the copy, not the object. Writers never meet: a copy is written under a
temporary name and renamed into place, and the processes of one node take a lock per name, so a second
decoder of the same object waits for the first one's copy. With FRAMEJUDGE_NO_CACHE on, a copy lives
only for the decode that made it.

A URL names a bucket and an object and nothing else: the endpoint, scheme, region and credentials
are the operator's, never an item's (an items file is data, often written by someone else, and the
machine's credentials go wherever the endpoint is). A URL with a query (pyarrow's
`?endpoint_override=...&scheme=http`), a fragment, a port or user information is refused, when the
items are loaded and again when the object is read. The operator names a custom endpoint with
FRAMEJUDGE_S3_ENDPOINT or FRAMEJUDGE_GCS_ENDPOINT (`https://host[:port]`) and a region with
FRAMEJUDGE_S3_REGION. The endpoint's host is resolved once and must be public or this machine's
loopback (private and link-local addresses, the cloud metadata address among them, only with
FRAMEJUDGE_STORAGE_ALLOW_PRIVATE on: framejudge.net); plain `http://` is taken only for an endpoint
on loopback (a local emulator or proxy), so credentials never cross a network in clear. The Ray engine
hands the driver's settings to its actors (`storage_settings`, `use_storage_settings`).

Credentials come from pyarrow's own chains: for S3 the AWS variables, the shared config and
credentials files, and instance or container roles; for GCS Google's application default
credentials. A URL carrying credentials is refused: a video's name is written into every verdict.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from datetime import timedelta
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from .. import config, net
from ..env import cache_off, env_switch
from ..errors import FramejudgeError
from .errors import EmptyFile, FileTooLarge, FrameSamplerError, InvalidRequest, NotARegularFile, VideoNotFound

INSTALL = "pip install '.[storage]'"
SCHEMES = {"s3": "S3", "gs": "Google Cloud Storage", "gcs": "Google Cloud Storage"}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,221}$")
GCS_RETRY_LIMIT_S = 30  # GCS's client otherwise retries a failing request for 15 minutes
S3_CONNECT_TIMEOUT_S = 10.0  # S3's client: a connection, and a request's silence, are given up after these
S3_REQUEST_TIMEOUT_S = 60.0
ENDPOINT_VARIABLES = {"s3": "FRAMEJUDGE_S3_ENDPOINT", "gcs": "FRAMEJUDGE_GCS_ENDPOINT"}
REGION_VARIABLE = "FRAMEJUDGE_S3_REGION"
ALLOW_PRIVATE_VARIABLE = "FRAMEJUDGE_STORAGE_ALLOW_PRIVATE"
# the operator's object storage settings, as the Ray engine hands them to its actors
STORAGE_VARIABLES = (*ENDPOINT_VARIABLES.values(), REGION_VARIABLE, ALLOW_PRIVATE_VARIABLE)
DEFAULT_CACHE_MB = 10 * 1024
IN_USE_S = 120.0  # a copy used this recently is never evicted: a decoder may be about to open it
STALE_PART_S = 3600.0  # a partial download untouched this long belongs to a process that is gone
CHUNK = 1 << 20


class StorageUnavailable(FramejudgeError, RuntimeError):
    """A video given as an s3:// or gs:// URL without pyarrow installed (the `storage` extra)."""

    code = "storage_unavailable"


class UnsupportedURL(FrameSamplerError):
    """A video named by a URL framejudge does not read: another scheme, credentials in it, no bucket."""

    code = "unsupported_url"


class StorageSettingsError(FramejudgeError, ValueError):
    """The operator's object storage settings (FRAMEJUDGE_S3_ENDPOINT ...) are not ones framejudge uses:
    not an http(s) endpoint, plain http off loopback, an address not allowed."""

    code = "storage_settings"


class ObjectReadFailed(FrameSamplerError):
    """Object storage could not be reached, or the object could not be read to its end."""

    code = "object_read_failed"


def url_scheme(video: str | os.PathLike[str]) -> str | None:
    """The scheme of a video named by a URL (`s3`, `gs`, `ftp` ...), lower case; None for a path."""
    if not isinstance(video, str):
        return None
    m = _SCHEME.match(video)
    return m.group(1).lower() if m else None


def is_url(video: str | os.PathLike[str]) -> bool:
    return url_scheme(video) is not None


def local_path_of(url: str) -> Path | None:
    """The path a file:// URL names (None for any other URL)."""
    if url_scheme(url) != "file":
        return None
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise UnsupportedURL("a file:// URL names a file on this machine: file:///absolute/path, with no host, "
                             "query or fragment", url)
    return Path(unquote(parts.path))


def check_url(url: str) -> None:
    """That `url` is one framejudge reads (s3://, gs:// or file://: a bucket and a key, no query,
    fragment, port or credentials) and, for object storage, that pyarrow is installed and the
    operator's endpoint is one framejudge uses: UnsupportedURL, StorageUnavailable or
    StorageSettingsError if not. No request is sent (the operator's endpoint is resolved, once)."""
    scheme = url_scheme(url)
    if scheme == "file":
        local_path_of(url)
        return
    if scheme not in SCHEMES:
        raise UnsupportedURL(f"{scheme}:// URLs are not read; a video is a path, or an object in S3 (s3://bucket/key) "
                             "or Google Cloud Storage (gs://bucket/key)", url)
    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise UnsupportedURL("credentials do not belong in a video URL, which is written into every verdict; "
                             "give them as the storage's own credentials (AWS variables or files, Google "
                             "application default credentials)", _shown(url))
    if "?" in url or "#" in url:
        names = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True)})
        what = f"query options ({', '.join(n[:40] for n in names[:5])})" if names else "a query or fragment"
        raise UnsupportedURL(f"a video URL names a bucket and an object, nothing else: {what} refused; the "
                             "storage's endpoint, scheme, region and credentials are set by the operator "
                             f"({config.name(ENDPOINT_VARIABLES['s3'])}, {config.name(ENDPOINT_VARIABLES['gcs'])}, "
                             f"{config.name(REGION_VARIABLE)})", _shown(url))
    if not parts.netloc or not parts.path.strip("/"):
        raise UnsupportedURL(f"name the object: {scheme}://bucket/key", url)
    if not _BUCKET.match(parts.netloc):
        raise UnsupportedURL(f"{parts.netloc[:80]!r} is not a bucket name (a video URL names a bucket and an "
                             "object; no host, port or endpoint)", _shown(url))
    _pyarrow_fs()
    storage_endpoint(_kind(scheme))


def _kind(scheme: str) -> str:
    return "s3" if scheme == "s3" else "gcs"


@dataclass(frozen=True)
class Endpoint:
    """An operator's object storage endpoint, checked: `scheme://host:port`."""

    scheme: str
    host: str
    port: int

    @property
    def override(self) -> str:
        """As pyarrow's endpoint_override takes it."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.override}"


_ENDPOINTS: dict[tuple[str, bool], Endpoint] = {}


def storage_endpoint(kind: str) -> Endpoint | None:
    """The operator's endpoint for `kind` ('s3' or 'gcs'), checked (once per process and value); None
    for the provider's own. StorageSettingsError naming the variable for one framejudge does not use."""
    var = config.name(ENDPOINT_VARIABLES[kind])
    raw = (config.get(var) or "").strip()
    if not raw:
        return None
    try:
        allow_private = env_switch(config.name(ALLOW_PRIVATE_VARIABLE))
    except ValueError as exc:
        raise StorageSettingsError(str(exc)) from None
    with _FS_LOCK:
        known = _ENDPOINTS.get((raw, allow_private))
    if known is not None:
        return known
    shown = f"{var}={raw[:100]!r}"
    parts = urlsplit(raw)
    try:
        port = parts.port
    except ValueError:
        raise StorageSettingsError(f"{shown}: the port must be a number from 1 to 65535") from None
    if (parts.scheme not in net.DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc
            or parts.path.strip("/") or parts.query or parts.fragment):
        raise StorageSettingsError(f"{shown}: give the endpoint as https://host[:port] (http://host:port only on "
                                   "this machine's loopback)")
    host, port = parts.hostname, port or net.DEFAULT_PORTS[parts.scheme]
    try:
        addresses = net.resolve(host, port)
    except net.ResolveFailed as exc:
        raise StorageSettingsError(f"{shown}: {exc}") from None
    if parts.scheme == "http" and not all(net.loopback_address(a) for a in addresses):
        plain = next(a for a in addresses if not net.loopback_address(a))
        raise StorageSettingsError(f"{shown}: credentials are never sent over plain http off this machine "
                                   f"({host} is {plain}); use https, or http only to a loopback address")
    try:
        net.check_addresses(host, addresses, allow_private=allow_private, allow_loopback=True)
    except net.AddressRefused as exc:
        raise StorageSettingsError(f"{shown}: {exc} (allow it with {config.name(ALLOW_PRIVATE_VARIABLE)}=1)") from None
    endpoint = Endpoint(parts.scheme, host, port)
    with _FS_LOCK:
        _ENDPOINTS[(raw, allow_private)] = endpoint
    return endpoint


def storage_settings() -> dict[str, str]:
    """The operator's object storage settings in this process (the variables that are set), for
    processes elsewhere (Ray's actors) to read objects with."""
    return {name: value for name in STORAGE_VARIABLES if (value := config.get(name)) is not None}


def use_storage_settings(settings: dict[str, str]) -> None:
    """Read objects with `settings` (from `storage_settings` in another process): they replace this
    process's own, also for the decoding processes it starts."""
    for name in STORAGE_VARIABLES:
        if name in settings:
            os.environ[config.name(name)] = settings[name]
        else:
            os.environ.pop(config.name(name), None)
    with _FS_LOCK:
        _FILESYSTEMS.clear()


@contextlib.contextmanager
def named(url: str) -> Iterator[None]:
    """Errors about a node-local copy of an object name the object's URL, as the user gave it."""
    try:
        yield
    except FrameSamplerError as exc:
        exc.path = url
        raise


def _shown(url: str) -> str:
    """A URL as it may be printed: without its user information or query."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _pyarrow_fs() -> Any:
    try:
        import pyarrow.fs
    except ImportError:
        raise StorageUnavailable(f"videos in object storage (s3:// and gs:// URLs) are read with pyarrow, which is "
                                 f"not installed: {INSTALL}") from None
    return pyarrow.fs


_FILESYSTEMS: dict[tuple[str, ...], Any] = {}
_FS_LOCK = threading.Lock()


def _filesystem(url: str) -> tuple[Any, str, str]:
    """pyarrow's file system for the URL's bucket on the operator's endpoint (made once per process: an
    S3 bucket's region is looked up when it is made), the object's path in it, and where it is read
    from (the endpoint, or '' for the provider's own)."""
    try:
        check_url(url)  # again where the object is read: a URL that reached here some other way is refused too
    except StorageSettingsError as exc:
        raise ObjectReadFailed(str(exc), url) from None
    parts = urlsplit(url)
    kind, bucket = _kind(parts.scheme.lower()), parts.netloc
    endpoint = storage_endpoint(kind)
    region = (config.get(REGION_VARIABLE) or "").strip() if kind == "s3" else ""
    base = (kind, bucket, str(endpoint or ""), region)
    with _FS_LOCK:
        fs = _FILESYSTEMS.get(base)
    if fs is None:
        pafs = _pyarrow_fs()
        options: dict[str, Any] = {}
        if endpoint is not None:
            options.update(endpoint_override=endpoint.override, scheme=endpoint.scheme)
        try:
            if kind == "s3":
                if region:
                    options["region"] = region
                elif endpoint is None:  # as pyarrow's URIs do: the bucket's own region
                    options["region"] = pafs.resolve_s3_region(bucket)
                fs = pafs.S3FileSystem(connect_timeout=S3_CONNECT_TIMEOUT_S, request_timeout=S3_REQUEST_TIMEOUT_S,
                                       **options)
            else:
                fs = pafs.GcsFileSystem(retry_time_limit=timedelta(seconds=GCS_RETRY_LIMIT_S), **options)
        except ValueError as exc:  # ArrowInvalid: a malformed name
            raise UnsupportedURL(_message(exc), url) from None
        except OSError as exc:
            raise ObjectReadFailed(f"object storage could not be reached: {_message(exc)}", url) from None
        with _FS_LOCK:
            fs = _FILESYSTEMS.setdefault(base, fs)
    return fs, bucket + unquote(parts.path), str(endpoint or "")


def _message(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


@dataclass(frozen=True)
class ObjectInfo:
    size: int
    mtime_ns: int | None
    origin: str = ""  # the operator's endpoint it was read from ('' for the provider's own)

    def version(self, url: str) -> str:
        """The name of the object's copy: its URL, where it was read from and the version its metadata gives."""
        return hashlib.sha256(f"{url}\0{self.origin}\0{self.size}\0{self.mtime_ns}".encode()).hexdigest()


def stat_object(url: str) -> ObjectInfo:
    """The object's size and modification time, from its metadata alone (nothing is read):
    VideoNotFound for a missing object or bucket and for denied access, NotARegularFile for a prefix
    (a folder), EmptyFile for an empty object."""
    fs, path, origin = _filesystem(url)
    from pyarrow.fs import FileType

    try:
        info = fs.get_file_info(path)
    except OSError as exc:
        text = _message(exc)
        if "ACCESS_DENIED" in text or "AccessDenied" in text or "PERMISSION_DENIED" in text or "403" in text:
            raise VideoNotFound(f"access denied ({text})", url) from None
        raise ObjectReadFailed(f"the object's metadata could not be read: {text}", url) from None
    if info.type == FileType.NotFound:
        raise VideoNotFound("no such object (or no such bucket)", url)
    if info.type == FileType.Directory:
        raise NotARegularFile("is a prefix (a folder of objects), not an object", url)
    if not info.size:
        raise EmptyFile("object is empty (0 bytes)", url)
    return ObjectInfo(int(info.size), info.mtime_ns, origin)


def check_object(url: str) -> int:
    """Like `check_file` for a URL: that the object exists and is not empty, from its metadata; its size."""
    return stat_object(url).size


def object_cache_dir() -> Path:
    env = config.get("FRAMEJUDGE_CACHE_DIR")
    import platformdirs

    base = Path(env) if env else Path(platformdirs.user_cache_dir("framejudge"))
    return base / "objects"


def object_cache_bytes() -> int:
    """The object cache's size limit (FRAMEJUDGE_OBJECT_CACHE_MB); ValueError naming the variable for
    a value that is not a number of MiB."""
    name = config.name("FRAMEJUDGE_OBJECT_CACHE_MB")
    raw = (config.get("FRAMEJUDGE_OBJECT_CACHE_MB") or "").strip()
    if not raw:
        return DEFAULT_CACHE_MB * 1024**2
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not mb > 0 or mb == float("inf"):
        raise ValueError(f"{name}={raw[:50]!r}: set it to a number of MiB above 0, or leave it unset")
    return int(mb * 1024**2)


@contextlib.contextmanager
def local_copy(url: str, max_bytes: int) -> Iterator[tuple[Path, str]]:
    """A node-local copy of the object at `url` and its SHA-256: from the object cache, or read into it
    now (with FRAMEJUDGE_NO_CACHE on, or an object larger than the cache, a temporary copy deleted on
    leaving). Objects above `max_bytes` are refused (FileTooLarge) from their metadata."""
    info = stat_object(url)
    if info.size > max_bytes:
        raise FileTooLarge(f"object is {info.size / 1024**3:.1f} GiB, above the limit of "
                           f"{max_bytes / 1024**3:.1f} GiB", url)
    try:
        limit = object_cache_bytes()
    except ValueError as exc:
        raise InvalidRequest(str(exc), url) from None
    if cache_off() or info.size > limit:
        with tempfile.TemporaryDirectory(prefix="framejudge-object-") as scratch:
            target = Path(scratch) / "object.video"
            yield target, _download(url, info, target)
        return
    yield ObjectCache(object_cache_dir(), limit).fetch(url, info)


def _download(url: str, info: ObjectInfo, target: Path) -> str:
    """Stream the object into `target` (written under a temporary name, renamed into place when whole);
    its SHA-256."""
    fs, path, _ = _filesystem(url)
    part = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    digest = hashlib.sha256()
    written = 0
    try:
        with fs.open_input_stream(path) as src, open(part, "wb") as dst:
            while block := src.read(CHUNK):
                digest.update(block)
                dst.write(block)
                written += len(block)
                if written > info.size:
                    break
        if written != info.size:
            raise ObjectReadFailed(f"the object changed while it was read ({written} bytes, its metadata said "
                                   f"{info.size}); try again", url)
        os.replace(part, target)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and not part.parent.exists():
            raise
        raise ObjectReadFailed(f"reading the object failed: {_message(exc)}", url) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
    return digest.hexdigest()


class ObjectCache:
    """Node-local copies of objects, least recently used removed first above `size_limit` bytes.

    `<key>.video` is a whole copy (key: the URL and the object's version), `<key>.sha256` its hash;
    `locks/` holds 256 lock files (by the key's first byte) that the processes of one node take while
    one of them reads an object in."""

    def __init__(self, directory: Path, size_limit: int) -> None:
        self.directory = directory
        self.size_limit = size_limit

    def fetch(self, url: str, info: ObjectInfo) -> tuple[Path, str]:
        key = info.version(url)
        target = self.directory / f"{key}.video"
        digest_file = self.directory / f"{key}.sha256"
        hit = self._hit(target, digest_file, info)
        if hit is not None:
            return target, hit
        (self.directory / "locks").mkdir(parents=True, exist_ok=True)
        with open(self.directory / "locks" / f"{key[:2]}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when its process dies
            try:
                hit = self._hit(target, digest_file, info)  # another process read it in meanwhile
                if hit is not None:
                    return target, hit
                for stale in self.directory.glob(f"{key}.video.*.part"):  # left by a process that was killed
                    with contextlib.suppress(FileNotFoundError):
                        stale.unlink()
                digest = _download(url, info, target)
                tmp = digest_file.with_name(f"{digest_file.name}.{os.getpid()}.part")
                tmp.write_text(digest)
                os.replace(tmp, digest_file)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        self._evict(keep=target)
        return target, digest

    def _hit(self, target: Path, digest_file: Path, info: ObjectInfo) -> str | None:
        try:
            st = target.stat()
            digest = digest_file.read_text().strip()
        except (FileNotFoundError, NotADirectoryError):
            return None
        if st.st_size != info.size or len(digest) != 64:
            return None
        with contextlib.suppress(OSError):  # used now: the access time orders eviction (the mtime is kept)
            os.utime(target, ns=(time.time_ns(), st.st_mtime_ns))
        return digest

    def _evict(self, keep: Path) -> None:
        """Remove the least recently used copies until the folder is within its limit; copies used in
        the last IN_USE_S seconds stay (a decoder may be opening one), as do partial downloads in
        progress."""
        now = time.time()
        copies = []
        total = 0
        for entry in os.scandir(self.directory):
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            if entry.name.endswith(".part"):
                if now - st.st_mtime > STALE_PART_S:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                else:
                    total += st.st_size
            elif entry.name.endswith(".video"):
                total += st.st_size
                copies.append((max(st.st_atime, st.st_mtime), entry.path, st.st_size))
        for used, path, size in sorted(copies):
            if total <= self.size_limit:
                break
            if path == str(keep) or now - used < IN_USE_S:
                continue
            for gone in (path, path[: -len(".video")] + ".sha256"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(gone)
            total -= size

    def clear(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

