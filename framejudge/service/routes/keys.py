"""The API keys, as an admin key sees them (never their secrets): what `framejudge keys list` shows."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from ..bodies import StrictJsonRoute
from ..context import ServiceDep, authorized
from ..store import ApiKey, aware, key_state, list_keys

router = APIRouter(route_class=StrictJsonRoute)


class KeySummary(BaseModel):
    id: str = Field(description="the key's public id (`fj_<id>_...`), as `framejudge keys list` shows it")
    name: str
    scopes: list[str]
    created_at: datetime
    expires_at: datetime | None = Field(description="when it stops being accepted (null: never; "
                                                    "`framejudge keys create --expires-in`)")
    state: Literal["active", "revoked", "expired"] = Field(description="revoked and expired keys are refused "
                                                                       "(401) and their jobs stopped")


@router.get("/v1/keys", tags=["keys"], operation_id="list_keys", response_model=list[KeySummary])
async def keys(svc: ServiceDep, _: Annotated[ApiKey, Depends(authorized("admin"))]) -> list[KeySummary]:
    """Every API key, oldest first: id, name, scopes, when it was made and expires, and whether it is
    active, revoked or expired (keys are made and revoked with `framejudge keys`)."""
    found = await asyncio.to_thread(list_keys, svc.engine)
    return [KeySummary(id=k.id, name=k.name, scopes=k.scopes.split(","), created_at=aware(k.created_at),
                       expires_at=aware(k.expires_at) if k.expires_at else None,
                       state=key_state(k))
            for k in found]
