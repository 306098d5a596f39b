"""A call's wait counts from when the worker took it in, queueing behind its session included.

A real redis-server and a real ``sbx worker``. The session's first call holds its
shell until the test lets it go, so the second call queues behind it for as long
as the test decides.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import redis

from tests.fixtures_workers import settings_for
from tests.helpers import RedisProcess, wait_until
from worker.client import SandboxClient
from worker.protocol.ledger import claim_key

ANSWER_MARGIN_S = 1.0
MIN_BUDGET_S = 0.5
"""worker.service.calls.call_deadline: a call's deadline is taken-in time plus
max(MIN_BUDGET_S, wait - ANSWER_MARGIN_S)."""


def test_a_call_whose_wait_ended_while_it_queued_is_answered_without_running(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    start_worker(own_redis.url)
    started, go, ran = tmp_path / "started", tmp_path / "go", tmp_path / "late-ran"
    hold = f"touch {started}; while [ ! -e {go} ]; do sleep 0.02; done; echo first"
    ledger = redis.Redis.from_url(own_redis.url)
    with SandboxClient(session_id="late", settings=settings_for(sbx_home, own_redis.url)) as c:
        first: list[str] = []
        holder = threading.Thread(
            target=lambda: first.append(c.tool_call("terminal", {"command": hold}, wait=120))
        )
        holder.start()
        wait_until(started.exists, 60, "the first call to hold the session's shell")
        late_id = uuid.uuid4().hex
        wait = 1.0
        answer = json.loads(
            c.tool_call("terminal", {"command": f"touch {ran}"}, wait=wait, call_id=late_id)
        )
        assert answer["status"] == "pending"  # the caller gave up: the call is still queued
        wait_until(lambda: bool(ledger.exists(claim_key(late_id))), 30, "the call taken in")
        # The worker took the call in before the claim existed: its deadline is at most
        # this long after now, on the same machine's monotonic clock. Wait past it, so the
        # call starts only after its caller's wait is over.
        taken_by = time.monotonic()
        budget = max(MIN_BUDGET_S, wait - ANSWER_MARGIN_S)
        wait_until(lambda: time.monotonic() > taken_by + budget, 30, "the call's deadline")
        go.touch()
        holder.join(60)
        assert json.loads(first[0])["output"] == "first\n"
        late = json.loads(c.result(late_id, 60))
    assert late["status"] == "cancelled", late
    assert "nothing ran" in late["error"] and "wait ended" in late["error"], late
    assert not ran.exists()


def test_a_queued_call_still_within_its_wait_runs(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    start_worker(own_redis.url)
    started, go = tmp_path / "started", tmp_path / "go"
    hold = f"touch {started}; while [ ! -e {go} ]; do sleep 0.02; done; echo first"
    with SandboxClient(session_id="ontime", settings=settings_for(sbx_home, own_redis.url)) as c:
        holder = threading.Thread(target=lambda: c.tool_call("terminal", {"command": hold}))
        holder.start()
        wait_until(started.exists, 60, "the first call to hold the session's shell")
        second: list[str] = []
        queued = threading.Thread(
            target=lambda: second.append(c.tool_call("terminal", {"command": "echo second"}))
        )
        queued.start()
        go.touch()
        holder.join(60)
        queued.join(60)
    assert json.loads(second[0])["output"] == "second\n"


def test_on_sigterm_a_call_queued_behind_its_session_says_the_worker_shut_down(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    worker = start_worker(own_redis.url, SBX_SHUTDOWN_GRACE="1")
    started = tmp_path / "started"
    ledger = redis.Redis.from_url(own_redis.url)
    with SandboxClient(session_id="stopping", settings=settings_for(sbx_home, own_redis.url)) as c:
        c.exec("true")
        holder = threading.Thread(
            target=lambda: c.tool_call("terminal", {"command": f"touch {started}; sleep 600"})
        )
        holder.start()
        wait_until(started.exists, 60, "the first call to hold the session's shell")
        queued_id = uuid.uuid4().hex
        message = c.call_message("terminal", {"command": "echo never"}, call_id=queued_id)
        c.sender.send_call(message, c._session_route())
        wait_until(lambda: bool(ledger.exists(claim_key(queued_id))), 30, "the call taken in")
        worker.stop()  # SIGTERM: after the grace the running call and the queued one end
        queued = json.loads(c.result(queued_id, 60))
        holder.join(60)
    assert queued["status"] == "cancelled", queued
    assert "worker shutting down before it started" in queued["error"], queued
