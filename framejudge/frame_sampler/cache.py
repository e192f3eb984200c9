"""A content-addressed, size-bounded on-disk cache of sampled frames.

Key: the file's SHA-256 plus the sampling parameters (and the sampler's
format version), so renaming or copying a file still hits, and editing it
misses. Built on diskcache (SQLite index, safe across processes and threads,
least-recently-used eviction under a size limit).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import diskcache
import platformdirs

from .. import config
from ..schema import SamplerParams

CACHE_FORMAT = 2  # raised whenever the same parameters pick other frames
DEFAULT_SIZE_LIMIT = 2 * 1024**3


def default_cache_dir() -> Path:
    env = config.get("FRAMEJUDGE_CACHE_DIR")
    base = Path(env) if env else Path(platformdirs.user_cache_dir("framejudge"))
    return base / "frames"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class FrameCache:
    def __init__(self, directory: str | os.PathLike[str] | None = None, size_limit: int = DEFAULT_SIZE_LIMIT):
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self._cache = diskcache.Cache(str(self.directory), size_limit=size_limit)

    def file_hash(self, path: Path) -> str:
        """SHA-256 of the file, memoised by (real path, size, mtime, inode)."""
        st = os.stat(path)
        memo = ("sha256", str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
        digest = self._cache.get(memo)
        if digest is None:
            digest = file_sha256(path)
            self._cache.set(memo, digest)
        return str(digest)

    def remember_hash(self, path: Path, digest: str) -> None:
        """Record the SHA-256 of a file already hashed while it was written (a copy of an object), so
        that `file_hash` does not read it again."""
        st = os.stat(path)
        self._cache.set(("sha256", str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino), digest)

    @staticmethod
    def key(sha256: str, params: SamplerParams, limits: Any) -> str:
        return f"frames:{CACHE_FORMAT}:{sha256}:{params.model_dump_json()}:{limits!r}"

    def get(self, key: str) -> Any:
        return self._cache.get(key)

    def put(self, key: str, value: Any) -> None:
        self._cache.set(key, value)

    def clear(self) -> None:
        self._cache.clear()

    def close(self) -> None:
        self._cache.close()

    def remove_older_than(self, cutoff: float) -> tuple[int, int]:
        """Remove the entries stored before `cutoff` (seconds since the epoch, as time.time()):
        (how many sampling results went, and the bytes of their files)."""
        cache = self._cache
        rows = cache._sql("SELECT key, raw, size FROM Cache WHERE store_time < ?", (cutoff,)).fetchall()
        count = size = 0
        for db_key, raw, nbytes in rows:
            key = cache._disk.get(db_key, raw)
            if cache.delete(key) and isinstance(key, str) and key.startswith("frames:"):
                count += 1
                size += nbytes or 0
        return count, size

    def count(self) -> int:
        """Number of cached sampling results."""
        return sum(1 for k in self._cache.iterkeys() if isinstance(k, str) and k.startswith("frames:"))
