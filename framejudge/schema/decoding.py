"""How videos are decoded: in killable, memory-capped processes. The same limits for the CLI's
`grade` and `worker`, the service's settings and the Python API."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

MAX_DECODE_WORKERS = 256  # decoding processes: each holds a decoder and its imports
MAX_DECODE_MEMORY_MB = 1024 * 1024  # 1 TiB per process: far above it the address-space limit overflows

DecodeWorkers = Annotated[int, Field(ge=1, le=MAX_DECODE_WORKERS,
                                     description="processes that decode videos (killable, memory-capped)")]
DecodeTimeout = Annotated[float, Field(gt=0, allow_inf_nan=False,
                                       description="seconds per video sampling, in a decoding process")]
DecodeMemoryMB = Annotated[int, Field(ge=256, le=MAX_DECODE_MEMORY_MB,
                                      description="resident-memory cap per decoding process, in MB (there is no "
                                                  "uncapped decoding)")]


class DecodeLimits(BaseModel):
    """One run's decoding processes: how many, how long each video may take, how much memory each may hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: DecodeWorkers | None = Field(None, description="None: one per core")
    timeout_s: DecodeTimeout = 600.0
    memory_mb: DecodeMemoryMB = 4096

    def processes(self, cores: int | None) -> int:
        """How many decoding processes to start on a machine with `cores` (None: unknown)."""
        return self.workers or cores or 1
