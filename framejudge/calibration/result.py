"""The result of one coefficient: a value, or 'undefined' with the reason. Never a silent 0 or 1."""

from __future__ import annotations

from pydantic import BaseModel


class Coefficient(BaseModel):
    name: str
    value: float | None
    undefined: str | None = None  # why there is no value
    units: int = 0  # units that entered the computation
    raters: int = 0
    observed: float | None = None  # observed agreement (or 1 - observed disagreement)
    expected: float | None = None  # chance agreement

    @classmethod
    def undefined_because(cls, name: str, reason: str, units: int = 0, raters: int = 0) -> Coefficient:
        return cls(name=name, value=None, undefined=reason, units=units, raters=raters)
