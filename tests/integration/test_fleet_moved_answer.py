"""The answer of a session's first call on the worker it moved to: ``session_moved`` and,
in ``error``, only what could not be restored -- not a shell "death" that never was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures_fleet import Fleet


def test_a_session_moved_whole_answers_without_an_error(fleet_of: Any, tmp_path: Path) -> None:
    fleet: Fleet = fleet_of(2)
    client = fleet.client("fleet-moved-answer")
    made = json.loads(client.tool_call("terminal", {"command": f"cd {tmp_path} && export K=v"}))
    assert made["exit_code"] == 0, made
    fleet.kill(fleet.index_of(fleet.serving_pid(client)))
    moved = json.loads(client.tool_call("terminal", {"command": 'echo "$PWD:$K"'}))
    assert moved["output"] == f"{tmp_path}:v\n" and moved.get("session_moved") is True, moved
    assert moved["error"] is None, moved  # everything was restored
