"""Uploaded videos: streamed to a server-managed folder under generated names, size-capped while
they arrive, sniffed before FFmpeg sees them, probed, and recorded per API key.

A client's file name is kept for display only; it never becomes part of a path. Content is
accepted only when its first bytes are a video container framejudge decodes (an allow-list,
not a general file identifier: FFmpeg would happily open an HLS playlist that points at local
files, so nothing reaches FFmpeg without a container signature), and then only when PyAV finds
a decodable video stream in it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from python_multipart.exceptions import FormParserError, ParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from sqlalchemy import BigInteger, DateTime, Index, String, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, Session, mapped_column

from ..files import not_utf8, text_line, utf8_text
from ..frame_sampler import FrameSamplerError, IsolatedSampler, NotAVideo, NoVideoStream, SamplerParams, VideoInfo
from .problems import ProblemError
from .store import Base, generated_id

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

SNIFF_BYTES = 512
MAX_BOUNDARY = 256  # python-multipart's limit
UPLOAD_PREFIX = "upload:"


def sniff_container(head: bytes) -> str | None:
    """The container family the first bytes announce, or None for anything else."""
    if len(head) >= 8 and head[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip", b"pnot"):
        return "mp4/mov"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "matroska/webm"
    if head[:4] == b"RIFF" and head[8:12] in (b"AVI ", b"AVIX"):
        return "avi"
    if head[:3] == b"FLV":
        return "flv"
    if head[:4] == b"OggS":
        return "ogg"
    if head.startswith(b"\x30\x26\xb2\x75\x8e\x66\xcf\x11"):
        return "asf"
    if head[:4] == b"\x00\x00\x01\xba":
        return "mpeg-ps"
    if len(head) >= 377 and head[0] == head[188] == head[376] == 0x47:
        return "mpeg-ts"
    if len(head) >= 389 and head[4] == head[196] == head[388] == 0x47:
        return "mpeg-ts (m2ts)"
    return None


class Upload(Base):
    __tablename__ = "uploads"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(16), index=True)
    filename: Mapped[str] = mapped_column(String(200))  # the client's name, for display only
    stored_as: Mapped[str] = mapped_column(String(64))  # generated name inside the upload folder
    bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    container: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    __table_args__ = (Index("ix_uploads_key_sha256", "key_id", "sha256"),)
    # True for an upload that a request's identical content was answered with (it was stored
    # before): that request does not own it, and forgetting the request's videos keeps it
    reused = False


@dataclass(frozen=True)
class Quota:
    """What one API key may keep in the upload folder (uploaded and fetched videos together)."""

    max_bytes: int
    max_files: int

    def check_file(self, used: Usage) -> None:
        if used.files + 1 > self.max_files:
            raise ProblemError(413, "Upload quota reached",
                               f"this API key keeps {used.files} videos, the most this server keeps per key "
                               f"({self.max_files}, FRAMEJUDGE_UPLOAD_QUOTA_FILES): delete some "
                               "(DELETE /v1/videos/{id}) or ask the operator for more")

    def check_bytes(self, used: Usage, more: int, filename: str) -> None:
        if used.bytes + more > self.max_bytes:
            raise ProblemError(413, "Upload quota reached",
                               f"{filename}: this API key's videos would take over {mib(self.max_bytes)} MiB, the "
                               f"most this server keeps per key (FRAMEJUDGE_UPLOAD_QUOTA_MB; {mib(used.bytes)} MiB "
                               "kept now): delete some (DELETE /v1/videos/{id}) or ask the operator for more")


@dataclass
class Usage:
    """What a key keeps, counting the videos its request has taken in so far."""

    files: int = 0
    bytes: int = 0


def mib(n: int) -> str:
    return f"{n / 1024**2:,.1f}"


def display_name(name: str | None) -> str:
    """A client file name reduced to something safe to show (never used as a path)."""
    base = re.split(r"[\\/]", name or "")[-1]
    return re.sub(r"[^\w.\- ]", "_", base)[:200] or "video"


@dataclass
class _Incoming:
    """One file arriving: written to a .part file, hashed and counted as it comes."""

    folder: Path
    limit: int
    filename: str
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    size: int = 0
    head: bytes = b""
    container: str | None = None
    digest: "hashlib._Hash" = field(default_factory=hashlib.sha256)

    def __post_init__(self) -> None:
        self.part = self.folder / f"{self.token}.part"
        self.handle = open(self.part, "xb")

    def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise ProblemError(413, "Upload too large",
                               f"{self.filename} is over the limit of {self.limit / 1024**2:.0f} MiB per video")
        if self.container is None:
            self.head += data[: SNIFF_BYTES - len(self.head)]
            if len(self.head) >= SNIFF_BYTES:
                self._sniff()
        self.digest.update(data)
        self.handle.write(data)

    def _sniff(self) -> None:
        self.container = sniff_container(self.head)
        if self.container is None:
            raise ProblemError(415, "Not a video",
                               f"{self.filename} does not start like a video container framejudge reads "
                               "(MP4/MOV, Matroska/WebM, AVI, MPEG-TS/PS, FLV, Ogg, ASF)")

    def finish(self) -> None:
        self.handle.close()
        if self.size == 0:
            raise ProblemError(422, "Empty upload", f"{self.filename} is empty (0 bytes)")
        if self.container is None:
            self._sniff()

    def discard(self) -> None:
        self.handle.close()
        self.part.unlink(missing_ok=True)


class UploadStore:
    """The server-managed folder of uploaded (and fetched) videos, and their records."""

    def __init__(self, folder: Path, engine: Engine, max_bytes: int, sampler: IsolatedSampler,
                 quota: Quota | None = None) -> None:
        self.folder = folder
        self.sampler = sampler
        self.engine = engine
        self.max_bytes = max_bytes
        self.quota = quota
        folder.mkdir(parents=True, exist_ok=True)

    def usage(self, key_id: str) -> Usage:
        """How many videos, and how many bytes, this key keeps."""
        with Session(self.engine) as s:
            files, size = s.execute(select(func.count(), func.coalesce(func.sum(Upload.bytes), 0))
                                    .where(Upload.key_id == key_id)).one()
        return Usage(int(files), int(size))

    def incoming(self, filename: str | None) -> _Incoming:
        return _Incoming(self.folder, self.max_bytes, display_name(filename))

    def _stored(self, key_id: str, sha256: str) -> Upload | None:
        """This key's upload of the same content, if it keeps one (and its file)."""
        with Session(self.engine) as s:
            for upload in s.scalars(select(Upload).where(Upload.key_id == key_id, Upload.sha256 == sha256)
                                    .order_by(Upload.created_at)):
                if (self.folder / upload.stored_as).is_file():
                    s.expunge(upload)
                    return upload
        return None

    async def _probe(self, path: Path, filename: str) -> VideoInfo:
        """The sampler's own checks and a one-frame decode, in a killable process: what a grade of
        this file will meet; 415 or 422 when it is not a usable video."""
        try:
            return (await asyncio.to_thread(self.sampler.sample, path, SamplerParams(n=1), cache=False)).video
        except (NotAVideo, NoVideoStream) as exc:
            raise ProblemError(415, "Not a video", f"{filename}: {exc.message}", code=exc.code) from None
        except FrameSamplerError as exc:
            raise ProblemError(422, "Unusable video", f"{filename}: {exc.message}", code=exc.code) from None

    async def commit(self, incoming: _Incoming, key_id: str, used: Usage | None = None) -> tuple[Upload, VideoInfo]:
        """Probe the finished file and record it; a file that is not a usable video is deleted.
        Content this key already keeps (the same SHA-256) is stored once: the upload it is
        already stored as is answered (marked `reused`), and the new copy deleted. Other content
        is refused (413) where it would take the key past its quota (`used`: what the key keeps,
        counting its request's videos so far, which this one is added to when it is stored)."""
        try:
            incoming.finish()
        except ProblemError:
            incoming.discard()
            raise
        stored = await asyncio.to_thread(self._stored, key_id, incoming.digest.hexdigest())
        if stored is not None:
            incoming.discard()
            info = await self._probe(self.folder / stored.stored_as, incoming.filename)
            # as this request names it (a multipart job's items name their videos so); not saved
            stored.reused, stored.filename = True, incoming.filename
            return stored, info
        if self.quota is not None:
            used = used if used is not None else await asyncio.to_thread(self.usage, key_id)
            try:
                self.quota.check_file(used)
                self.quota.check_bytes(used, incoming.size, incoming.filename)
            except ProblemError:
                incoming.discard()
                raise
        final = self.folder / f"{incoming.token}.video"
        os.replace(incoming.part, final)
        try:
            info = await self._probe(final, incoming.filename)
        except ProblemError:
            final.unlink(missing_ok=True)
            raise
        upload = Upload(id=incoming.token, key_id=key_id, filename=incoming.filename, stored_as=final.name,
                        bytes=incoming.size, sha256=incoming.digest.hexdigest(), container=incoming.container or "",
                        created_at=datetime.now(timezone.utc))
        with Session(self.engine) as s, s.begin():
            s.add(upload)
            s.flush()
            s.expunge(upload)
        if used is not None:
            used.files, used.bytes = used.files + 1, used.bytes + upload.bytes
        return upload, info

    async def save(self, chunks: AsyncIterator[bytes], filename: str | None, key_id: str) -> tuple[Upload, VideoInfo]:
        """One video (a fetched URL's body), within the key's quota, stored once per content."""
        incoming = self.incoming(filename)
        try:
            async for chunk in chunks:
                incoming.write(chunk)
            return await self.commit(incoming, key_id)
        finally:
            incoming.discard()

    def forget(self, upload: Upload) -> None:
        """Delete an upload a request made, with its file; one the request was answered with
        because its content was already stored (`reused`) stays."""
        if upload.reused:
            return
        with Session(self.engine) as s, s.begin():
            row = s.get(Upload, upload.id)
            if row is not None:
                s.delete(row)
        (self.folder / upload.stored_as).unlink(missing_ok=True)

    def find(self, ref: str, key_id: str) -> Upload:
        """The upload behind 'upload:<id>', for the key that uploaded it (404 for anyone else)."""
        upload_id = ref.removeprefix(UPLOAD_PREFIX)
        upload = None
        if generated_id(upload_id):
            with Session(self.engine) as s:
                upload = s.scalar(select(Upload).where(Upload.id == upload_id, Upload.key_id == key_id))
                if upload is not None:
                    s.expunge(upload)
        if upload is None:
            raise ProblemError(404, "No such upload", f"no uploaded video {ref!r} for this API key")
        return upload

    def path_of(self, ref: str, key_id: str) -> Path:
        return self.folder / self.find(ref, key_id).stored_as


@dataclass
class Form:
    """A multipart body read as a stream: text fields in memory, files straight into the store."""

    fields: dict[str, str] = field(default_factory=dict)
    files: list[tuple[str, Upload, VideoInfo]] = field(default_factory=list)  # (field name, upload, info)


class _Parts:
    """python-multipart callbacks: text parts collected in memory, file parts written to the store
    as they arrive; finished file parts wait in `done` to be committed (probed and recorded)."""

    def __init__(self, store: UploadStore, max_field_bytes: int, max_files: int) -> None:
        self.store, self.max_field_bytes, self.max_files = store, max_field_bytes, max_files
        self.fields: dict[str, str] = {}
        self.done: list[tuple[str, _Incoming]] = []
        self.files_seen = 0
        self.headers: dict[str, bytes] = {}
        self.header_field = self.header_value = b""
        self.name = ""
        self.incoming: _Incoming | None = None  # the file part being read
        self.text: bytearray | None = None  # the text part being read

    def callbacks(self) -> MultipartCallbacks:
        return {"on_header_field": self.on_header_field, "on_header_value": self.on_header_value,
                "on_header_end": self.on_header_end, "on_headers_finished": self.on_headers_finished,
                "on_part_data": self.on_part_data, "on_part_end": self.on_part_end}

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        self.headers[self.header_field.decode("latin-1").lower()] = self.header_value
        self.header_field = self.header_value = b""

    def on_headers_finished(self) -> None:
        _, disposition = parse_options_header(self.headers.get("content-disposition", b""))
        self.name = disposition.get(b"name", b"").decode("utf-8", "replace")
        filename = disposition.get(b"filename")
        if filename is None:
            self.text = bytearray()
            return
        self.files_seen += 1
        if self.files_seen > self.max_files:
            raise ProblemError(413, "Too many files", f"at most {self.max_files} videos per request")
        self.incoming = self.store.incoming(filename.decode("utf-8", "replace"))

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.incoming is not None:
            self.incoming.write(data[start:end])
            return
        assert self.text is not None
        self.text += data[start:end]
        if len(self.text) > self.max_field_bytes:
            raise ProblemError(413, "Field too large",
                               f"form field {self.name!r} is over {self.max_field_bytes // 1024**2} MiB")

    def on_part_end(self) -> None:
        if self.incoming is not None:
            self.done.append((self.name, self.incoming))
        elif self.text is not None:
            if self.name in self.fields:
                raise ProblemError(422, "Invalid body", f"form field {self.name!r} is given twice")
            try:
                self.fields[self.name] = utf8_text(bytes(self.text))
            except UnicodeDecodeError as exc:
                raise ProblemError(400, "Bad multipart body", f"form field {self.name!r}, line "
                                   f"{text_line(exc.object, exc.start)}: {not_utf8(exc)}") from None
        self.headers, self.incoming, self.text = {}, None, None

    def discard(self) -> None:
        """Remove every file not committed yet."""
        if self.incoming is not None:
            self.incoming.discard()
        for _, incoming in self.done:
            incoming.discard()


async def read_multipart(stream: AsyncIterator[bytes], content_type: str, store: UploadStore, key_id: str,
                         max_field_bytes: int, max_files: int) -> Form:
    """Parse multipart/form-data incrementally; every file part becomes an upload. Nothing is kept
    from a request that fails (partial files are removed, committed uploads forgotten)."""
    _, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if not boundary:
        raise ProblemError(400, "Bad multipart body", "the Content-Type has no multipart boundary")
    if len(boundary) > MAX_BOUNDARY:
        raise ProblemError(400, "Bad multipart body", f"the multipart boundary is {len(boundary)} characters; "
                                                      f"at most {MAX_BOUNDARY} (RFC 2046 allows 70)")
    parts = _Parts(store, max_field_bytes, max_files)
    try:
        parser = MultipartParser(boundary, parts.callbacks())
    except FormParserError as exc:  # a boundary the parser refuses for another reason
        raise ProblemError(400, "Bad multipart body", str(exc)[:300]) from None
    form = Form(fields=parts.fields)
    used: Usage | None = None  # what the key keeps, with this request's videos as they are stored

    async def commit_done() -> None:
        nonlocal used
        while parts.done:
            name, incoming = parts.done.pop(0)
            if used is None:
                used = await asyncio.to_thread(store.usage, key_id)
            upload, info = await store.commit(incoming, key_id, used)
            form.files.append((name, upload, info))

    try:
        try:
            async for chunk in stream:
                parser.write(chunk)
                await commit_done()
            parser.finalize()
        except ParseError as exc:
            raise ProblemError(400, "Bad multipart body", str(exc)[:300]) from None
        await commit_done()
        if parts.incoming is not None or parts.text is not None:
            raise ProblemError(400, "Bad multipart body", "the body ended inside a part")
        return form
    except BaseException:
        for _, upload, _ in form.files:  # an all-or-nothing request
            store.forget(upload)
        raise
    finally:
        parts.discard()
