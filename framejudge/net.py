"""The checks every address framejudge itself connects to goes through: a host on the operator's
allow-list (with its port), and every address the host resolves to one the operator allowed.

Used by the service's fetcher of video URLs (service/media.py) and by object storage's operator
endpoints (frame_sampler/objects.py). A host is resolved once and the caller connects to the address
that was checked (the service pins it; object storage's endpoint is the operator's own).

Allow-list entries are `host`, `*.example.com` (its subdomains), an IP address, each optionally with
a port: `host:8080`, `[::1]:8080`. An entry without a port allows only the default port of the URL's
scheme (80 for http, 443 for https), so allowing `localhost` does not allow every local service.
A redirect is followed only within its origin (`same_origin`)."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import FramejudgeError

DEFAULT_PORTS = {"http": 80, "https": 443}


class AddressRefused(FramejudgeError, PermissionError):
    """A host that resolves to an address the operator did not allow (private, link-local, ...)."""

    code = "address_not_allowed"


class ResolveFailed(FramejudgeError, OSError):
    """A host name that does not resolve, or is not a valid name."""

    code = "cannot_resolve"


@dataclass(frozen=True)
class HostRule:
    host: str  # lower case, no trailing dot; '*.example.com' for subdomains
    port: int | None  # None: the scheme's default port only

    def allows(self, host: str, port: int, scheme: str) -> bool:
        host = host.lower().rstrip(".").strip("[]")
        if _is_address(host):
            host = str(ipaddress.ip_address(host))
        if self.port is None:
            if port != DEFAULT_PORTS.get(scheme):
                return False
        elif port != self.port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def host_rule(entry: str) -> HostRule:
    """An allow-list entry; ValueError for one that is not `host`, `*.domain`, an address, each with an
    optional `:port` (IPv6 with a port in brackets)."""
    text = entry.strip()
    host, port = text, None
    if any(c in text for c in "/@?# ") or not text:
        raise ValueError(f"{entry!r} is not a host name or host:port (give names like media.example.com, "
                         "*.example.com or media.example.com:8080)")
    if text.startswith("["):
        inside, close, rest = text[1:].partition("]")
        if not close or (rest and not rest.startswith(":")):
            raise ValueError(f"{entry!r} is not a host name or host:port")
        host, port = inside, rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port = text.split(":")
    if _is_address(host):
        host = str(ipaddress.ip_address(host))
    elif ":" in host or any(c in host for c in "/@?#[] ") or not host.strip("*."):
        raise ValueError(f"{entry!r} is not a host name or host:port (give names like media.example.com, "
                         "*.example.com or media.example.com:8080)")
    number = None
    if port is not None:
        if not port.isdigit() or not 0 < int(port) <= 65535:
            raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535")
        number = int(port)
    return HostRule(host.lower().rstrip("."), number)


def host_rules(entries: list[str]) -> list[HostRule]:
    return [host_rule(e) for e in entries]


def host_allowed(host: str, port: int, scheme: str, rules: list[HostRule]) -> bool:
    """Whether `host` at `port` (for a URL of `scheme`) is on the allow-list."""
    return any(rule.allows(host, port, scheme) for rule in rules)


def origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin: scheme, host (lower case, an address in its usual form) and port (the
    scheme's default where none is given)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".")
    if _is_address(host):
        host = str(ipaddress.ip_address(host))
    try:
        port = parts.port
    except ValueError:
        port = -1
    scheme = parts.scheme.lower()
    return scheme, host, port if port is not None else DEFAULT_PORTS.get(scheme)


def same_origin(a: str, b: str) -> bool:
    """Whether two URLs have one origin (a redirect between them stays with one server)."""
    return origin(a) == origin(b)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: the last 32 bits are an IPv4 address
TEREDO = ipaddress.ip_network("2001::/32")  # the client's IPv4 address is carried, obscured
NOT_GLOBAL = [ipaddress.ip_network(n) for n in ("3fff::/20",)]  # documentation (newer than some Pythons know)


def public_address(address: str) -> bool:
    """Whether an address is plainly public. An IPv6 address that carries an IPv4 address
    (IPv4-mapped, NAT64, 6to4, ISATAP) is public only if that IPv4 address is; other forms that
    carry one (IPv4-compatible, IPv4-translated, Teredo, local-use NAT64) and anything outside
    global unicast space are refused."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv4Address):
        return _public_ipv4(ip)
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    if ip.ipv4_mapped is not None or ip in NAT64:  # the IPv4 address is where it goes
        return _public_ipv4(low32)
    if (ip not in GLOBAL_UNICAST or ip in TEREDO or any(ip in n for n in NOT_GLOBAL)
            or not ip.is_global or ip.is_multicast or ip.is_site_local):
        return False
    embedded = ip.sixtofour or (low32 if _isatap(ip) else None)
    return embedded is None or _public_ipv4(embedded)


def loopback_address(address: str) -> bool:
    """Whether an address is this machine's loopback (127.0.0.0/8, ::1, or ::ffff:127.x.x.x)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _public_ipv4(ip: ipaddress.IPv4Address) -> bool:
    return ip.is_global and not ip.is_multicast


def _isatap(ip: ipaddress.IPv6Address) -> bool:
    """An ISATAP interface identifier (RFC 5214): ...:0000:5efe:a.b.c.d or ...:0200:5efe:a.b.c.d."""
    return (int(ip) >> 32) & 0xFDFF_FFFF == 0x0000_5EFE


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (an address resolves to itself), in the resolver's order."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ResolveFailed(f"cannot resolve {host}: {exc.strerror}") from None
    except UnicodeError:  # a label empty or over 63 characters
        raise ResolveFailed(f"{host[:200]} is not a valid host name") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))  # each sockaddr's IP address, as text


def checked_addresses(host: str, port: int, *, allow_private: bool = False, allow_loopback: bool = False) -> list[str]:
    """The addresses of `host`, every one of them allowed: public, or loopback where `allow_loopback`,
    or any where `allow_private` (an internal server the operator named); AddressRefused naming the
    first that is not."""
    addresses = resolve(host, port)
    check_addresses(host, addresses, allow_private=allow_private, allow_loopback=allow_loopback)
    return addresses


def check_addresses(host: str, addresses: list[str], *, allow_private: bool = False,
                    allow_loopback: bool = False) -> None:
    """`checked_addresses` for addresses already resolved."""
    if not allow_private:
        blocked = [a for a in addresses if not (public_address(a) or (allow_loopback and loopback_address(a)))]
        if blocked:
            raise AddressRefused(f"{host} resolves to a non-public address ({blocked[0]}); refused")
