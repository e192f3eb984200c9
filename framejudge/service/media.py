"""Where a request's video comes from: an upload, a path inside the media root, or (only when
enabled) a URL on an allow-listed host.

URL fetching is off unless hosts are listed. When on, every hop is checked: http(s) only, the
host on the allow-list, every address it resolves to public (no loopback, private, link-local,
shared or reserved ranges, nor IPv6 forms carrying such an IPv4 address), and the connection
pinned to the address that was checked (the checks are framejudge.net's, which object storage's
endpoints go through too), so a DNS answer that changes between the check and the connect cannot reach
an internal address. Redirects are followed only within the URL's origin (scheme, host and port),
each hop re-checked the same way.
A host is allowed with its port: an
entry without one allows only the scheme's default port. The body goes through the upload store: the same size limit, sniffing and probing as an upload.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from urllib.parse import urljoin

import httpx

from .. import net
from .problems import ProblemError
from .settings import Settings
from .uploads import UPLOAD_PREFIX, Upload, UploadStore

MAX_REDIRECTS = 5


def inside_media_root(path: str, root: Path | None, uploads: Path | None = None) -> Path:
    """A server-side video path, allowed only inside the media root (no '..', no symlink escape)
    and never inside the upload folder (uploads belong to their keys and are named 'upload:<id>')."""
    if root is None:
        raise ProblemError(403, "Server paths disabled",
                           "this server has no media root; upload the video or give an allowed URL")
    candidate = Path(path)
    if ".." in candidate.parts:
        raise ProblemError(400, "Bad video path", "'..' is not allowed in video paths")
    full = (root / candidate) if not candidate.is_absolute() else candidate
    try:
        resolved = full.resolve()
    except RuntimeError:  # a symlink loop (Python < 3.13)
        raise ProblemError(400, "Bad video path", f"{path}: symbolic link loop") from None
    except OSError as exc:
        loop = exc.errno == errno.ELOOP
        raise ProblemError(400, "Bad video path", f"{path}: {'symbolic link loop' if loop else exc.strerror}") from None
    if not resolved.is_relative_to(root.resolve()):
        raise ProblemError(403, "Outside the media root", f"{path} resolves outside the media root")
    if uploads is not None and resolved.is_relative_to(uploads.resolve()):
        raise ProblemError(403, "Not a media path", f"{path} lies in the upload folder; refer to an uploaded "
                                                   "video as 'upload:<id>'")
    return resolved


async def checked_address(host: str, port: int, allow_private: bool) -> str:
    """One address of `host` to connect to; every address it resolves to must be public (net.py)."""
    try:
        return (await asyncio.to_thread(net.checked_addresses, host, port, allow_private=allow_private))[0]
    except net.AddressRefused as exc:
        raise ProblemError(403, "Address not allowed", str(exc)) from None
    except net.ResolveFailed as exc:
        invalid = "not a valid host name" in str(exc)
        raise ProblemError(400 if invalid else 422, "Bad video URL" if invalid else "Video URL failed",
                           str(exc)) from None


async def fetch_url(url: str, settings: Settings, store: UploadStore, key_id: str, deadline: float | None = None,
                    shared: int = 1) -> Upload:
    """Download a video from an allow-listed URL into the upload store, all of it (every hop and
    the body) within the fetch deadline: `deadline` (the event loop's clock) when the request's
    `shared` URLs share one, else FRAMEJUDGE_URL_DEADLINE from now."""
    if not settings.url_hosts:
        raise ProblemError(400, "URL inputs disabled", "this server does not fetch video URLs; upload the video")
    if deadline is None:
        deadline = asyncio.get_running_loop().time() + settings.url_deadline_s
    rules = net.host_rules(settings.url_hosts)
    current = url
    async with httpx.AsyncClient(timeout=httpx.Timeout(settings.url_timeout_s), follow_redirects=False,
                                 trust_env=False) as client:
        for hop in range(MAX_REDIRECTS + 1):
            try:
                target = httpx.URL(current)
                _ = target.host  # a malformed IDNA label fails here, not later
            except (httpx.InvalidURL, ValueError) as exc:  # IDNA errors are ValueErrors
                raise ProblemError(400, "Bad video URL", f"{current[:200]!r}: {exc}"[:300]) from None
            if target.scheme not in ("http", "https") or not target.host:
                raise ProblemError(400, "Bad video URL", f"only http and https URLs are fetched, not {current[:200]!r}")
            port = target.port if target.port is not None else net.DEFAULT_PORTS[target.scheme]
            if not 0 < port <= 65535:  # httpx parses any number; connecting to it would fail unhandled
                raise ProblemError(400, "Bad video URL", f"{current[:200]!r}: port {port} is not 1 to 65535")
            if not net.host_allowed(target.host, port, target.scheme, rules):
                what = "redirect to" if hop else "host"
                shown = f"{target.host}:{port}" if ":" not in target.host else f"[{target.host}]:{port}"
                raise ProblemError(403, "Host not allowed", f"{what} {shown} is not on this server's allow-list "
                                                            "(an entry without a port allows only port 80 and 443)")
            try:
                async with asyncio.timeout_at(deadline):
                    address = await checked_address(target.host, port, settings.url_allow_private)
                pinned = target.copy_with(host=address)
                headers = {"Host": target.netloc.decode("ascii"), "Accept": "video/*, */*;q=0.1"}
                extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
                async with asyncio.timeout_at(deadline):
                    response = await client.send(client.build_request("GET", pinned, headers=headers,
                                                                      extensions=extensions), stream=True)
                try:
                    if response.is_redirect:
                        location = response.headers.get("location", "").strip()
                        if not location:
                            raise ProblemError(422, "Video URL failed", f"{target.host} answered HTTP "
                                                                        f"{response.status_code} without a Location")
                        following = urljoin(current, location)
                        if not net.same_origin(current, following):
                            raise ProblemError(403, "Redirect not allowed",
                                               f"{target.host} redirects to another origin "
                                               f"({net.origin(following)[1][:200]}); only redirects within one "
                                               "origin (scheme, host and port) are followed")
                        current = following
                        continue
                    if response.status_code != 200:
                        raise ProblemError(422, "Video URL failed", f"{target.host} answered HTTP {response.status_code}")
                    declared = response.headers.get("content-length")
                    if declared and declared.isdigit() and int(declared) > store.max_bytes:
                        raise ProblemError(413, "Video too large",
                                           f"{target.host} declares {int(declared) / 1024**2:.0f} MiB; the limit is "
                                           f"{store.max_bytes / 1024**2:.0f} MiB")
                    name = PurePosixPath(target.path).name or target.host
                    # the deadline covers the download, not the probe of the finished file
                    upload, _ = await store.save(_until(deadline, response.aiter_bytes()), name, key_id)
                    return upload
                finally:
                    await response.aclose()
            except httpx.HTTPError as exc:
                raise ProblemError(422, "Video URL failed", f"{target.host}: {type(exc).__name__} {exc}"[:300]) from None
            except TimeoutError:
                together = f", for all {shared} video URLs of the request" if shared > 1 else ""
                raise ProblemError(422, "Video URL too slow", f"{target.host}: the download did not finish within "
                                   f"{settings.url_deadline_s:g} s (FRAMEJUDGE_URL_DEADLINE{together})") from None
    raise ProblemError(422, "Video URL failed", f"more than {MAX_REDIRECTS} redirects")


async def _until(deadline: float, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The chunks of a body, each awaited no later than `deadline` (then TimeoutError)."""
    iterator = aiter(chunks)
    while True:
        async with asyncio.timeout_at(deadline):
            try:
                chunk = await anext(iterator)
            except StopAsyncIteration:
                return
        yield chunk


class MediaResolver:
    """Turns a request's video reference into a server path, per the server's rules."""

    def __init__(self, settings: Settings, store: UploadStore) -> None:
        self.settings = settings
        self.store = store

    async def resolve(self, ref: str, key_id: str, fetched: list[Upload] | None = None,
                      deadline: float | None = None, shared: int = 1) -> Path:
        """The server path of `ref`; videos fetched from URLs (by `deadline`, when the request's
        `shared` URLs share one) are appended to `fetched`."""
        if "\x00" in ref:
            raise ProblemError(400, "Bad video reference", "a video reference cannot contain a NUL character")
        if ref.startswith(UPLOAD_PREFIX):
            return self.store.path_of(ref, key_id)
        if ref.split("://", 1)[0].lower() in ("s3", "gs", "gcs"):
            raise ProblemError(400, "Bad video URL", "the service reads no object storage (s3://, gs://): upload "
                                                     "the video, or name it by an http(s) URL on an allowed host")
        if "://" in ref:
            upload = await fetch_url(ref, self.settings, self.store, key_id, deadline, shared)
            if fetched is not None:
                fetched.append(upload)
            return self.store.folder / upload.stored_as
        return inside_media_root(ref, self.settings.media_root, self.store.folder)

    def name_of(self, path: Path) -> str:
        """A resolved video path as clients name it, never the server's path: 'upload:<id>' in the
        upload folder, the path inside the media root, else the file's name alone."""
        folder, root = self.store.folder.resolve(), self.settings.media_root
        full = path.resolve() if path.is_absolute() else path
        if full.is_relative_to(folder) and full.suffix == ".video":
            return UPLOAD_PREFIX + full.stem
        if root is not None and full.is_relative_to(root.resolve()):
            return str(full.relative_to(root.resolve()))
        return path.name

    async def resolve_many(self, refs: list[str], key_id: str,
                           fetched: list[Upload] | None = None) -> dict[str, Path]:
        """Each distinct reference once (a job naming one URL a thousand times fetches it once), all
        of its URLs within one FRAMEJUDGE_URL_DEADLINE: a request naming 100 slow URLs is held for
        one deadline, not 100."""
        distinct = list(dict.fromkeys(refs))
        urls = [r for r in distinct if "://" in r]
        if len(urls) > self.settings.max_urls_per_request:
            raise ProblemError(422, "Too many URLs",
                               f"{len(urls)} distinct video URLs; at most {self.settings.max_urls_per_request} per request")
        deadline = asyncio.get_running_loop().time() + self.settings.url_deadline_s
        return {ref: await self.resolve(ref, key_id, fetched, deadline, len(urls)) for ref in distinct}
