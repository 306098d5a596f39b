"""A malformed message on a queue is dropped; the worker keeps serving, logs no content.

Real redis-server / RabbitMQ and real ``sbx worker`` processes. Messages on a
queue are taken in the order they were queued, so a call sent after the bad
message is answered only if the worker survived taking the bad one.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.fixtures_workers import settings_for
from tests.helpers import RedisProcess, wait_until
from worker.client import SandboxClient

SECRET_WORD = "tops3cretpayload"
"""Inside every bad message: the worker's log must never show it."""


def _envelope(text: str, **changes: Any) -> bytes:
    """A kombu Redis envelope around ``text`` (as base64), with ``changes`` applied."""
    envelope: dict[str, Any] = {
        "body": base64.b64encode(text.encode()).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"lang": "py", "task": "sbx.tool_call", "id": "bad-1"},
        "properties": {
            "body_encoding": "base64",
            "delivery_tag": "bad-tag",
            "delivery_info": {"exchange": "", "routing_key": "sbx"},
            "priority": 0,
        },
    }
    envelope.update(changes)
    return json.dumps(envelope).encode()


MALFORMED = {
    "not json": f"garbage {SECRET_WORD}".encode(),
    "truncated envelope": _envelope(f'[[{{"command": "{SECRET_WORD}"}}], {{}}, {{}}]')[:60],
    "json, not an object": json.dumps([SECRET_WORD]).encode(),
    "body not base64": _envelope("", body=f"!!!{SECRET_WORD}"),
    "not utf-8": b"\xff\xfe" + SECRET_WORD.encode(),
    "body not json": _envelope(f'{{"command": "{SECRET_WORD}"'),
    "no headers": _envelope(f'{{"command": "{SECRET_WORD}"}}', headers=None),
}


def test_malformed_messages_on_the_redis_queue_are_dropped_and_the_worker_serves_on(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any
) -> None:
    worker = start_worker(own_redis.url)
    queue = redis.Redis.from_url(own_redis.url)
    with SandboxClient(session_id="after", settings=settings_for(sbx_home, own_redis.url)) as c:
        for kind, message in MALFORMED.items():
            dropped = worker.log().count("dropped a m")
            queue.lpush("sbx", message)
            # Queued after the bad message: answered only by a worker that survived it.
            assert c.exec("echo still-serving", timeout=30).output == "still-serving\n", kind

            def more_dropped(seen: int = dropped) -> bool:
                return bool(worker.log().count("dropped a m") > seen)

            wait_until(more_dropped, 30, f"{kind}: a drop")
            assert worker.proc.poll() is None, kind
    log = worker.log()
    assert "Unrecoverable error" not in log
    assert SECRET_WORD not in log


def test_two_workers_survive_two_malformed_messages(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any
) -> None:
    workers = [start_worker(own_redis.url), start_worker(own_redis.url)]
    redis.Redis.from_url(own_redis.url).lpush("sbx", b"garbage", b"garbage")
    with SandboxClient(session_id="after2", settings=settings_for(sbx_home, own_redis.url)) as c:
        for i in range(4):
            assert c.exec(f"echo {i}", timeout=30).output == f"{i}\n"
    wait_until(
        lambda: sum(w.log().count("dropped a malformed message") for w in workers) == 2,
        30,
        "both bad messages to be dropped",
    )
    assert all(w.proc.poll() is None for w in workers)


_FAIL_ON_POISON = """
from kombu.transport import redis as kombu_redis
_read = kombu_redis.Channel._brpop_read
def _brpop_read(self, **options):
    try:
        return _read(self, **options)
    except Exception:
        raise RuntimeError("injected consumer failure") from None
kombu_redis.Channel._brpop_read = _brpop_read
"""


def test_a_worker_stopped_by_an_unrecoverable_error_exits_non_zero(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    # A fault Celery cannot recover from, injected into the worker's consumer loop (reading
    # a message that does not decode raises something else): the process must exit with a
    # failure status so that a process manager restarting on failure restarts it.
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(_FAIL_ON_POISON)
    from tests.fixtures_workers import worker_env
    from tests.helpers import WorkerProcess

    env = worker_env(sbx_home, own_redis.url)
    env["PYTHONPATH"] = f"{inject}:{env['PYTHONPATH']}"
    w = WorkerProcess(env, sbx_home / "failing.log")
    w.start()
    assert w.proc is not None
    try:
        redis.Redis.from_url(own_redis.url).lpush("sbx", b"garbage")
        status = w.proc.wait(timeout=120)
    finally:
        w.stop()
    assert "injected consumer failure" in w.log()
    assert status != 0, w.log()


def test_a_malformed_message_on_rabbitmq_is_dropped_and_the_worker_serves_on(
    sbx_home: Path, amqp_url: str, start_worker: Any
) -> None:
    from kombu.connection import Connection

    worker = start_worker(amqp_url)
    with Connection(amqp_url) as conn:  # type: ignore[no-untyped-call]
        producer = conn.Producer()
        for body, headers in (
            (f"garbage {SECRET_WORD}".encode(), None),
            (f'{{"command": "{SECRET_WORD}"'.encode(), {"task": "sbx.tool_call", "id": "x"}),
        ):
            producer.publish(
                body,
                routing_key="sbx",
                content_type="application/json",
                content_encoding="utf-8",
                headers=headers,
            )
    with SandboxClient(session_id="after", settings=settings_for(sbx_home, amqp_url)) as c:
        assert c.exec("echo still-serving", timeout=30).output == "still-serving\n"
    assert worker.proc.poll() is None
    assert SECRET_WORD not in worker.log()
    assert "dropped a message" in worker.log(), worker.log()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
