"""Where the purple agent's policy may be sent to play: MCP addresses by origin (scheme, host,
port). A brief names the MCP endpoint the policy's calls go to, and whoever reaches the purple
agent writes the brief: unchecked, it would play (and, with a hosted model, spend its
operator's tokens) against any server it is sent to."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

Origin = tuple[str, str, int]
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> Origin:
    """The origin of an http(s) URL; ValueError if it has none."""
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"{url[:100]!r} is not an http(s) address")
    return parts.scheme, parts.hostname.lower(), parts.port or DEFAULT_PORTS[parts.scheme]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class AllowedOrigins:
    """The origins given, or, with none, any loopback address."""

    def __init__(self, origins: Iterable[Origin] = ()) -> None:
        self.origins = set(origins)

    def allow(self, url: str) -> bool:
        try:
            origin = origin_of(url)
        except ValueError:
            return False
        return origin in self.origins if self.origins else is_loopback(origin[1])

    def __str__(self) -> str:
        listed = sorted(f"{scheme}://{host}:{port}" for scheme, host, port in self.origins)
        return ", ".join(listed) or "loopback addresses"
