"""``CallSender.ask`` with ``abandon``: a wait for the one worker that can answer ends
when that worker is gone, and a forged answer is still never returned (real redis-server;
no worker consumes the queue, so answers are put in the mailbox by the test)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.helpers import RedisProcess
from worker.broker import sender as sender_module
from worker.broker.connection import redis_client
from worker.broker.sender import CallSender
from worker.errors import ForgedResult
from worker.protocol.ledger import CallLedger, result_key
from worker.protocol.tasks import PING_TASK
from worker.settings import Settings

QUEUE = "sbx-test-nobody-consumes"


@pytest.fixture
def sender(external_redis_url: str, tmp_path: Path) -> Iterator[CallSender]:
    settings = Settings(home=tmp_path, broker_url=external_redis_url)
    s = CallSender(external_redis_url, external_redis_url, settings)
    s.ledger.client.flushdb()
    yield s
    s.close()


def genuine_only(answer: str) -> str | None:
    return None if answer.startswith("forged") else answer


def ask(sender: CallSender, task_id: str, abandon: Callable[[], bool]) -> str | None:
    # A whole wait far beyond the test's timeout: only the abandon can end it in time.
    return sender.ask(PING_TASK, [], 3600, QUEUE, task_id=task_id, accept=genuine_only,
                      abandon=abandon)  # fmt: skip


def test_the_wait_ends_with_no_answer_once_the_worker_is_gone(sender: CallSender) -> None:
    asked: list[int] = []

    def gone() -> bool:
        asked.append(1)
        return len(asked) >= 2  # present when first asked, gone the next time

    assert ask(sender, uuid.uuid4().hex, gone) is None
    assert len(asked) == 2


def test_an_answer_is_returned_while_the_worker_is_present(sender: CallSender) -> None:
    task_id = uuid.uuid4().hex

    def answer_then_stay() -> bool:
        sender.ledger.deliver(task_id, "pong")  # the answer comes after a first slice
        return False

    assert ask(sender, task_id, answer_then_stay) == "pong"


def test_a_forged_answer_is_dropped_and_the_genuine_one_after_it_returned(
    sender: CallSender,
) -> None:
    task_id = uuid.uuid4().hex
    sender.ledger.client.rpush(result_key(task_id), "forged-1")

    def genuine_later() -> bool:
        sender.ledger.deliver(task_id, "pong")
        return False

    assert ask(sender, task_id, genuine_later) == "pong"


def test_a_forged_answer_and_then_a_gone_worker_is_a_forged_result(sender: CallSender) -> None:
    task_id = uuid.uuid4().hex
    sender.ledger.client.rpush(result_key(task_id), "forged-1")
    with pytest.raises(ForgedResult):
        ask(sender, task_id, lambda: True)


def test_a_ledger_outage_longer_than_a_slice_is_ridden_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ledger stays away until the wait has failed to reach it three times: more
    # than one slice's worth of tries (a slice gives up on its first failure past its end).
    monkeypatch.setattr(sender_module, "REROUTE_CHECK_S", 0.05)
    server = RedisProcess()
    server.start()
    s = CallSender(server.url, server.url, Settings(home=tmp_path, broker_url=server.url))
    task_id = uuid.uuid4().hex
    back: list[threading.Thread] = []
    failures: list[BaseException] = []
    take = s.ledger.take_result

    def come_back_and_answer() -> None:
        server.start()
        delivered = CallLedger(redis_client(server.url), claim_ttl=600, lost_after=5.0)
        delivered.deliver(task_id, "pong")
        delivered.client.close()

    def take_counting_failures(call_id: str, timeout: float) -> str | None:
        try:
            return take(call_id, timeout)
        except redis.ConnectionError as exc:
            failures.append(exc)
            if len(failures) == 3:
                back.append(threading.Thread(target=come_back_and_answer))
                back[0].start()
            raise

    def outage_once() -> bool:
        if server.proc is not None and server.proc.poll() is None and not failures:
            server.kill()
        return False

    monkeypatch.setattr(s.ledger, "take_result", take_counting_failures)
    try:
        assert ask(s, task_id, outage_once) == "pong"
        assert len(failures) >= 3
    finally:
        for t in back:
            t.join(timeout=120)
        s.close()
        server.stop()
