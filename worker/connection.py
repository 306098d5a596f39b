"""Where the broker is: the configured URL, or the embedded server (started on demand)."""

from __future__ import annotations

from urllib.parse import urlparse

import redis

from .broker import EmbeddedBroker
from .settings import Settings


def resolve_broker_url(settings: Settings, *, start_embedded: bool = True) -> str:
    """``SBX_BROKER_URL`` if set; otherwise the embedded broker's URL (started if asked)."""
    if settings.broker_url:
        return settings.broker_url
    broker = EmbeddedBroker(settings.home, settings.embedded_redis_server)
    if start_embedded:
        broker.ensure_running()
    return broker.url


def display_url(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parsed = urlparse(url)
    if parsed.password is None:
        return url
    netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@", 1)
    return parsed._replace(netloc=netloc).geturl()


def redis_client(url: str) -> redis.Redis:
    """A redis-py client for a ``redis://``, ``rediss://`` or ``redis+socket://`` URL."""
    parsed = urlparse(url)
    if parsed.scheme in ("redis+socket", "socket", "unix"):
        return redis.Redis(unix_socket_path=parsed.path, socket_connect_timeout=5)
    if parsed.scheme in ("redis", "rediss"):
        return redis.Redis.from_url(url, socket_connect_timeout=5)
    raise ValueError(
        f"sbx keeps call claims and heartbeats in Redis; {parsed.scheme}:// is not a Redis URL"
    )
