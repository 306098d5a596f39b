from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import redis

from tests.fixtures_fleet import Fleet
from tests.helpers import wait_until


def test_short_wait_on_dead(fleet_of: Any, tmp_path: Path) -> None:
    fleet: Fleet = fleet_of(2, SBX_LOST_AFTER="3", SBX_HEARTBEAT_INTERVAL="0.3")
    c = fleet.client("fleet-short")
    assert json.loads(c.tool_call("terminal", {"command": "cd /tmp && export A=1"}))["exit_code"] == 0
    holder = fleet.index_of(fleet.serving_pid(c))
    fleet.kill(holder)
    a = json.loads(c.tool_call("terminal", {"command": f"touch {tmp_path}/ran"}, call_id="cz", wait=1))
    print(a)
    print("later", c.result("cz", 20))
    r = redis.Redis.from_url(fleet.broker_url)
    print([k for k in r.keys("sbx.w.*")], [r.llen(k) for k in r.keys("sbx.w.*")])
