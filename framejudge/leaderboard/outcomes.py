"""One battle's outcome, as the tables read it: which two models answered one turn, in which
slot each stood, and what the verdict said (or that the judge failed)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Winner = Literal["A", "B", "Both", "Neither"]


class BattleOutcome(BaseModel):
    """A graded battle: `model_a` answered as response A, `model_b` as response B. `winner` is the
    verdict's preference (Both and Neither are ties); None with `error` when the judge failed."""

    model_config = ConfigDict(extra="forbid")

    item_id: str = Field(description="the original item's id (not the battle's)")
    turn: int = 0
    video: str | None = Field(None, description="the item's video: bootstrap clusters are videos")
    model_a: str
    model_b: str
    winner: Winner | None = None
    category_a: str | None = None
    category_b: str | None = None
    length_a: int = Field(description="characters of model_a's answer")
    length_b: int = Field(description="characters of model_b's answer")
    swap_consistent: bool | None = Field(None, description="both orders agreed (None: not graded both ways)")
    domain: str | None = None
    task_type: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    error: str | None = Field(None, description="the judge error's kind, when the battle has no verdict")
