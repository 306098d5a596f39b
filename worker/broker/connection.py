"""Where the broker and the ledger are.

The *broker* carries Celery's task messages: ``SBX_BROKER_URL`` (Redis or
AMQP), or the embedded Redis under ``SBX_HOME``. The *ledger* is the Redis in
which sbx keeps its own state -- call claims, heartbeats, result mailboxes,
process routes, approvals: ``SBX_LEDGER_URL``, else the broker when that is
Redis, else the embedded Redis (started on demand, like the embedded broker).
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlencode, urlparse

import redis

from worker.broker.embedded import EmbeddedBroker
from worker.broker.urls import is_redis_url, url_scheme
from worker.settings import Settings, SettingsError

log = logging.getLogger(__name__)


def resolve_broker_url(settings: Settings, *, start_embedded: bool = True) -> str:
    """``SBX_BROKER_URL`` if set; otherwise the embedded broker's URL (started if asked)."""
    if settings.broker_url:
        return settings.broker_url
    return _embedded_url(settings, start_embedded)


def resolve_ledger_url(
    settings: Settings, broker_url: str | None = None, *, start_embedded: bool = True
) -> str:
    """The Redis URL of sbx's state (see the module doc).

    ``broker_url`` is the broker actually used when it differs from
    ``settings.broker_url`` (``sbx worker --broker``, ``SandboxClient(broker_url)``).
    Raises :class:`SettingsError` (one line) when ``SBX_LEDGER_URL`` is not Redis.
    """
    if settings.ledger_url:
        check_ledger_url(settings.ledger_url)
        return settings.ledger_url
    broker = broker_url or settings.broker_url
    if broker and is_redis_url(broker):
        return broker
    if broker and (urlparse(broker).hostname or "localhost") not in _LOOPBACK:
        # Results, claims and routes would stay on this machine: clients and workers
        # elsewhere never see them (their calls end "pending").
        log.warning("broker %s is on another machine but sbx's state stays in this "
                    "machine's embedded Redis: set SBX_LEDGER_URL to a Redis every client "
                    "and worker reaches", display_url(broker))  # fmt: skip
    return _embedded_url(settings, start_embedded)


_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def check_ledger_url(url: str) -> None:
    """:class:`SettingsError` unless ``url`` names a Redis server."""
    if not is_redis_url(url):
        scheme = url_scheme(url) or "(no scheme)"
        raise SettingsError(
            f"SBX_LEDGER_URL must be a Redis URL (redis://, rediss:// or redis+socket://), "
            f"not {scheme}: sbx keeps call claims, heartbeats and results there"
        )


def _embedded_url(settings: Settings, start: bool) -> str:
    broker = EmbeddedBroker(settings.home, settings.embedded_redis_server)
    if start:
        broker.ensure_running()
    return broker.url


_SECRET_QUERY_KEYS = frozenset({"password", "pass", "passwd", "token", "secret"})


def display_url(url: str) -> str:
    """``url`` without its password (userinfo or query parameter), for messages and logs."""
    parsed = urlparse(url)
    pairs = parse_qsl(parsed.query, keep_blank_values=True)
    secret_query = any(k.lower() in _SECRET_QUERY_KEYS for k, _ in pairs)
    if parsed.password is None and not secret_query:
        return url  # untouched: urlunparse would rewrite e.g. "redis+socket:///x" as ":/x"
    if parsed.password is not None:
        netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@", 1)
        parsed = parsed._replace(netloc=netloc)
    if secret_query:
        masked = [(k, "***" if k.lower() in _SECRET_QUERY_KEYS else v) for k, v in pairs]
        parsed = parsed._replace(query=urlencode(masked, safe="*"))
    return parsed.geturl()


def redis_client(url: str) -> redis.Redis:
    """A redis-py client for a ``redis://``, ``rediss://`` or ``redis+socket://`` URL."""
    parsed = urlparse(url)
    if parsed.scheme in ("redis+socket", "socket", "unix"):
        return redis.Redis(unix_socket_path=parsed.path, socket_connect_timeout=5)
    if parsed.scheme in ("redis", "rediss"):
        return redis.Redis.from_url(url, socket_connect_timeout=5)
    raise SettingsError(
        f"sbx keeps call claims and heartbeats in Redis; {parsed.scheme or '(no scheme)'}:// "
        "is not a Redis URL (set SBX_LEDGER_URL to one)"
    )
