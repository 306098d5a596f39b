"""A call sent to the own queue of a worker that died before taking it is not stranded
there: another worker moves it to the shared queue, so a caller that stopped waiting
(``pending``) and collects it later by its id gets its answer -- on Redis and on
RabbitMQ brokers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu.connection import Connection

from tests.fixtures_fleet import Fleet
from tests.helpers import wait_until
from worker.broker.urls import is_amqp_url
from worker.protocol.tasks import own_queue_name


@pytest.fixture(params=["redis", "amqp"])
def fleet(request: pytest.FixtureRequest, fleet_of: Any) -> Fleet:
    """Two workers whose presence lapses within seconds, on Redis or on RabbitMQ."""
    fast = {"SBX_LOST_AFTER": "3", "SBX_HEARTBEAT_INTERVAL": "0.3"}
    if request.param == "amqp":
        made: Fleet = fleet_of(2, broker_url=request.getfixturevalue("amqp_url"), **fast)
        return made
    started: Fleet = fleet_of(2, **fast)
    return started


def waiting(fleet: Fleet, queue: str) -> int:
    """How many messages wait on ``queue`` of the fleet's broker."""
    if not is_amqp_url(fleet.broker_url):
        return int(redis.Redis.from_url(fleet.broker_url).llen(queue))
    with Connection(fleet.broker_url) as connection:  # type: ignore[no-untyped-call]
        declared = connection.default_channel.queue_declare(queue, passive=True)
        return int(declared.message_count)


def test_a_call_left_on_a_dead_workers_queue_runs_once_elsewhere(
    fleet: Fleet, tmp_path: Path
) -> None:
    client = fleet.client("fleet-stranded")
    made = json.loads(client.tool_call("terminal", {"command": f"cd {tmp_path} && export K=v"}))
    assert made["exit_code"] == 0, made
    holder = fleet.index_of(fleet.serving_pid(client))
    dead_queue = own_queue_name(fleet.settings().queue, pid=fleet.pid(holder))
    fleet.kill(holder)
    # Sent while the dead worker still counts as present: to its own queue.
    sent = client.call_message("terminal", {"command": 'echo "$PWD:$K" >> ran'}, wait=60)
    client.sender.send_call(sent, dead_queue)
    assert waiting(fleet, dead_queue) == 1
    answer = json.loads(client.result(sent.call_id, 120))
    assert answer["exit_code"] == 0 and answer.get("session_moved") is True, answer
    assert (tmp_path / "ran").read_text() == f"{tmp_path}:v\n"
    wait_until(lambda: waiting(fleet, dead_queue) == 0, 60, "the dead worker's queue to empty")
