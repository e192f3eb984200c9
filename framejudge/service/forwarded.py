"""What a request says of its client through proxies the server trusts (FRAMEJUDGE_TRUSTED_PROXIES):
the client's address (X-Forwarded-For) and whether it came over HTTPS (X-Forwarded-Proto, or
Forwarded's proto). From any other peer these headers are the client's own words and are ignored."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from fastapi import Request

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(values: Sequence[str]) -> list[Network]:
    return [ipaddress.ip_network(v, strict=False) for v in values]


def _trusted(address: str, trusted: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in trusted)


def _peer(request: Request) -> str:
    return request.client.host if request.client else ""


def client_address(request: Request, trusted: Sequence[Network]) -> str:
    """The client's address: the peer's, or behind trusted proxies, the nearest X-Forwarded-For
    hop that is not one of them."""
    peer = _peer(request)
    if not _trusted(peer, trusted):
        return peer
    hops = [h.strip() for h in ",".join(request.headers.getlist("x-forwarded-for")).split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, trusted):
            return hop[:64]  # the header is the client's text: a bucket key, not a store of it
    return hops[0][:64] if hops else peer


def over_https(request: Request, trusted: Sequence[Network]) -> bool:
    """Whether the client's connection is HTTPS: this server's own scheme, or a trusted proxy's
    X-Forwarded-Proto (its first value: the proxy the client reached) or Forwarded proto."""
    if request.url.scheme == "https":
        return True
    if not _trusted(_peer(request), trusted):
        return False
    proto = request.headers.get("x-forwarded-proto")
    if proto is None:
        forwarded = request.headers.get("forwarded", "").split(",")[0]
        pairs = dict(p.strip().partition("=")[::2] for p in forwarded.split(";") if "=" in p)
        proto = pairs.get("proto", "").strip('"')
    return proto.split(",")[0].strip().lower() == "https"
