"""A broker that goes away: clear errors, nothing lost that can be kept, service resumes.

The broker here is a real redis-server that is SIGKILLed and restarted empty on
the same port, as a crashed and restarted broker would be.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import sbx, settings_for
from tests.helpers import RedisProcess, call_in_background, held_command, wait_until
from worker.client import BrokerUnavailable, SandboxClient


def test_a_call_sent_while_the_broker_is_down_fails_clearly_and_service_resumes(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any
) -> None:
    start_worker(own_redis.url)
    with SandboxClient(session_id="gone", settings=settings_for(sbx_home, own_redis.url)) as client:
        assert client.exec("echo before").output == "before\n"
        own_redis.kill()
        with pytest.raises(BrokerUnavailable) as info:
            client.tool_call("terminal", {"command": "echo never"})
        assert f"127.0.0.1:{own_redis.port}" in str(info.value)
        assert "not sent" in str(info.value)
        assert client.ping(timeout=1.0) is False
        own_redis.start()
        # The worker reconnects by itself; the same client works again.
        wait_until(lambda: client.ping(timeout=1.0), 60, "the worker to reconnect")
        assert client.exec("echo after").output == "after\n"


def test_a_running_call_keeps_its_result_across_a_broker_restart(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    worker = start_worker(own_redis.url)
    started, go, command = held_command(tmp_path, "finished")
    answer: list[str] = []
    with SandboxClient(
        session_id="restart", settings=settings_for(sbx_home, own_redis.url)
    ) as client:
        t = threading.Thread(
            target=lambda: answer.append(client.tool_call("terminal", {"command": command}))
        )
        t.start()
        wait_until(started.exists, 60, "the command to start")
        own_redis.kill()
        go.touch()
        # The call finished while the broker was gone: its worker holds the result.
        wait_until(lambda: "holding the result" in worker.log(), 60, "the worker to hold it")
        own_redis.start()
        t.join(timeout=120)
        assert not t.is_alive()
    result = json.loads(answer[0])
    assert (result["output"], result["exit_code"]) == ("finished\n", 0)
    assert "delivered" in worker.log()


def test_a_waiting_client_reports_a_broker_that_stays_away(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    worker = start_worker(own_redis.url)
    started, go, command = held_command(tmp_path, "late")
    with SandboxClient(session_id="away", settings=settings_for(sbx_home, own_redis.url)) as client:
        t, answer = call_in_background(client, command, wait=3)
        wait_until(started.exists, 60, "the command to start")
        own_redis.kill()
        t.join(timeout=120)
        assert not t.is_alive()
        # The call finishes with the broker still away; once it is back, the held result
        # is delivered (nobody collects it here: the waiting client gave up).
        go.touch()
        wait_until(lambda: "holding the result" in worker.log(), 60, "the worker to hold it")
        own_redis.start()
        wait_until(lambda: "delivered" in worker.log(), 60, "the held result's delivery")
    assert len(answer) == 1 and isinstance(answer[0], BrokerUnavailable), answer
    message = str(answer[0])
    assert "while waiting for call" in message and "may have run" in message


def test_a_revocation_made_elsewhere_survives_the_broker_restarting_empty(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    """A fleet's operator revokes a session from a home of its own (not the worker's).
    The ledger then restarts empty: the revoked token must stay refused on the worker,
    and a token minted after the revocation must go on working."""
    url = own_redis.url
    start_worker(url)
    operator = tmp_path / "operator"
    operator.mkdir(mode=0o700)
    shutil.copy2(sbx_home / "secret.key", operator / "secret.key")
    old = sbx(sbx_home, "session", "token", "rev", SBX_BROKER_URL=url).stdout.strip()
    settings = settings_for(sbx_home, url)
    with SandboxClient(session_id="rev", session_token=old, settings=settings) as c:
        assert c.exec("echo before").output == "before\n"
        revoked = sbx(operator, "session", "revoke", "rev", SBX_BROKER_URL=url)
        assert revoked.returncode == 0, revoked.stderr
        assert json.loads(c.tool_call("terminal", {"command": "true"}))["status"] == "denied"
        # The worker's own home learns of it (on its heartbeat).
        mirror = sbx_home / "sessions" / "revoked" / "rev"
        wait_until(mirror.exists, 60, "the worker to copy the revocation")
        own_redis.kill()
        own_redis.start()
        wait_until(lambda: c.ping(timeout=1.0), 60, "the worker to reconnect")
        denied = json.loads(c.tool_call("terminal", {"command": "echo ran"}))
        assert denied.get("status") == "denied" and "ran" not in denied.get("output", ""), denied
    new = sbx(sbx_home, "session", "token", "rev", SBX_BROKER_URL=url).stdout.strip()
    with SandboxClient(session_id="rev", session_token=new, settings=settings) as c:
        assert c.exec("echo after").output == "after\n"
