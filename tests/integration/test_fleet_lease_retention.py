"""A session's lease and recorded state outlive its *last* call by SBX_LEASE_RETENTION,
not its first one: a session in steady use on one worker keeps its lease (else its calls
fall to the shared queue mid-use and the session moves, its state possibly expired)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis

from tests.fixtures_fleet import Fleet
from tests.helpers import wait_until
from worker.protocol.leases import lease_key, state_key

RETENTION = 60


def test_each_call_renews_the_lease_and_the_state(fleet_of: Any, tmp_path: Path) -> None:
    fleet: Fleet = fleet_of(2, SBX_LEASE_RETENTION=str(RETENTION))
    client = fleet.client("fleet-retained")
    made = json.loads(client.tool_call("terminal", {"command": f"cd {tmp_path} && export K=v"}))
    assert made["exit_code"] == 0, made
    ledger = redis.Redis.from_url(fleet.broker_url)
    keys = [lease_key("fleet-retained"), state_key("fleet-retained")]
    assert all(0 < ledger.ttl(k) <= RETENTION for k in keys)
    # Time passes (the keys' TTLs are the clock): then a call that changes nothing.
    wait_until(lambda: all(ledger.ttl(k) < RETENTION - 5 for k in keys), 120, "TTLs to run")
    before = [ledger.ttl(k) for k in keys]
    assert json.loads(client.tool_call("terminal", {"command": "true"}))["exit_code"] == 0
    after = [ledger.ttl(k) for k in keys]
    assert all(a > b for a, b in zip(after, before, strict=True)), (before, after)
