"""Which `Host` and `Origin` values the server answers (DNS rebinding): parsing and comparison only,
no web framework, so configuration can validate `--allowed-host` names without FastAPI."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_ADDRESSES = frozenset({"", "0.0.0.0", "::"})
DEFAULT_PORTS = {"http": 80, "https": 443}

_HOST = re.compile(
    r"(?:\[(?P<ipv6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9][a-z0-9._-]*))(?::(?P<port>[0-9]{1,5}))?",
    re.IGNORECASE,
)


def parse_host(value: str) -> tuple[str, int | None] | None:
    """`name[:port]` or `[ipv6][:port]` → (lower-case name without brackets, port); None when it is
    anything else (user info, paths, spaces, an empty value)."""
    found = _HOST.fullmatch(value)
    if not found:
        return None
    ipv6 = found["ipv6"]
    if ipv6 is not None and not _is_ipv6(ipv6):
        return None
    port = int(found["port"]) if found["port"] else None
    if port is not None and port > 65535:
        return None
    return (ipv6 or found["name"]).lower(), port


def host_name(value: str) -> str:
    """A `--allowed-host` value as the server compares it (lower case, IPv6 without brackets).

    Raises ValueError when it is not a bare host name or address (no scheme, port or path)."""
    text = value.strip()
    if _is_ipv6(text):
        return text.lower()
    parsed = parse_host(text)
    if parsed is None or parsed[1] is not None:
        raise ValueError(
            f"{value!r} is not a host name: give a bare name or address such as waypoint.lan, "
            "192.168.1.5 or [fe80::1] (no scheme, port or path)"
        )
    return parsed[0]


def allowed_hosts(bound_host: str, extra: list[str] | tuple[str, ...] = ()) -> frozenset[str]:
    """The loopback names, the `--allowed-host` names, and the address the server is bound to
    unless it is a wildcard (0.0.0.0 and :: are not names a client asks for)."""
    names = {*LOOPBACK_NAMES, *(host_name(n) for n in extra)}
    bound = bound_host.strip().strip("[]").lower()
    if bound not in WILDCARD_ADDRESSES:
        names.add(host_name(bound))
    return frozenset(names)


def shown(name: str) -> str:
    """A name as it is written in a Host header (an IPv6 address in brackets)."""
    return f"[{name}]" if ":" in name else name


def same_origin(origin: str, host: str) -> bool:
    """Whether the `Origin` header names the site the request's `Host` header names. The scheme of
    the request is not known behind a TLS proxy, so a missing port defaults by the origin's scheme."""
    parts = urlsplit(origin)
    if parts.scheme not in DEFAULT_PORTS or parts.path or parts.query or parts.fragment:
        return False
    from_origin, from_host = parse_host(parts.netloc), parse_host(host)
    if from_origin is None or from_host is None:
        return False
    default = DEFAULT_PORTS[parts.scheme]
    return from_origin[0] == from_host[0] and (from_origin[1] or default) == (
        from_host[1] or default
    )


def _is_ipv6(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv6Address)
    except ValueError:
        return False
