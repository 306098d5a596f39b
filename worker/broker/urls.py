"""What a broker URL names, from its scheme alone (no connection, no other sbx import:
the settings check ``SBX_BROKER_URL`` with it)."""

from __future__ import annotations

from urllib.parse import urlparse

REDIS_SCHEMES = frozenset({"redis", "rediss", "redis+socket", "socket", "unix"})
"""URL schemes of a Redis server (``redis+socket``/``socket``/``unix``: a unix socket)."""
AMQP_SCHEMES = frozenset({"amqp", "amqps", "pyamqp"})
"""URL schemes of an AMQP 0-9-1 broker (RabbitMQ), through kombu's py-amqp transport."""


def url_scheme(url: str) -> str:
    """The lower-case scheme of ``url`` (``""`` when it has none)."""
    return urlparse(url).scheme.lower()


def is_redis_url(url: str) -> bool:
    """True for a URL naming a Redis server."""
    return url_scheme(url) in REDIS_SCHEMES


def is_amqp_url(url: str) -> bool:
    """True for a URL naming an AMQP broker."""
    return url_scheme(url) in AMQP_SCHEMES


def check_broker_url(url: str) -> None:
    """``ValueError`` unless ``url`` names a Redis or AMQP broker; it says the scheme,
    never the URL (it may hold a password)."""
    if not (is_redis_url(url) or is_amqp_url(url)):
        scheme = url_scheme(url) or "(no scheme)"
        raise ValueError(
            "must be a Redis or AMQP URL (redis://, rediss://, redis+socket://, amqp:// or "
            f"amqps://), not {scheme}"
        )
