"""A worker killed mid-call on a cloud backend (the real SDK against the fake service): the
call is answered ``lost``, and the session carries on with the next worker in the same
sandbox, with its directory and variables, and nothing of the killed call left running."""

from __future__ import annotations

import json
import secrets
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

from tests.fixtures_workers import settings_for
from tests.helpers import wait_until
from worker.client import SandboxClient

SESSION = "cloud-killed"
Cloud = tuple[str, dict[str, str], Callable[[], int]]
"""The backend's name, the worker's settings for its fake, and how many sandboxes the
session has there (the fake's count)."""


def _modal(request: pytest.FixtureRequest) -> Cloud:
    from tests.fakes.modal import TOKEN_ID, TOKEN_SECRET

    fake = request.getfixturevalue("fake_modal")
    env = {"SBX_MODAL_APP_NAME": "sbx-worker-killed", "SBX_MODAL_KILL_GRACE": "0.5",
           "MODAL_SERVER_URL": fake.server_url, "MODAL_TOKEN_ID": TOKEN_ID,
           "MODAL_TOKEN_SECRET": TOKEN_SECRET}  # fmt: skip
    request.addfinalizer(lambda: [fake.terminate_behind_the_back(s.sandbox_id)
                                  for s in fake.sandboxes_of_session(SESSION)])  # fmt: skip
    return "modal", env, lambda: len(fake.sandboxes_of_session(SESSION))


def _daytona(request: pytest.FixtureRequest) -> Cloud:
    fake = request.getfixturevalue("daytona_fake")
    env = {"SBX_DAYTONA_API_KEY": fake.token, "SBX_DAYTONA_API_URL": fake.api_url,
           "SBX_DAYTONA_TARGET": "us", "SBX_DAYTONA_KILL_GRACE": "0.5"}  # fmt: skip

    def mine() -> list[Any]:
        return list(fake.store.matching({"sbx.session": SESSION}))

    request.addfinalizer(lambda: [fake.delete(s.id) for s in mine()])
    return "daytona", env, lambda: len(mine())


def _vercel(request: pytest.FixtureRequest) -> Cloud:
    from tests.fakes.vercel import PROJECT_ID, TEAM_ID, TOKEN

    fake = request.getfixturevalue("fake_vercel")
    env = {"SBX_VERCEL_SANDBOX_BASE_URL": fake.base_url, "SBX_VERCEL_SANDBOX_TOKEN": TOKEN,
           "SBX_VERCEL_SANDBOX_TEAM_ID": TEAM_ID, "SBX_VERCEL_SANDBOX_PROJECT_ID": PROJECT_ID,
           "SBX_VERCEL_SANDBOX_READ_VERCEL_ENV": "false",
           "SBX_VERCEL_SANDBOX_KILL_GRACE": "0.5"}  # fmt: skip
    return "vercel_sandbox", env, lambda: len(fake.service.sandboxes)


@pytest.fixture(params=[_modal, _daytona, _vercel], ids=["modal", "daytona", "vercel"])
def cloud(request: pytest.FixtureRequest) -> Cloud:
    make: Callable[[pytest.FixtureRequest], Cloud] = request.param
    return make(request)


def _running(argv: list[str]) -> bool:
    """True while a process runs ``argv`` (the fakes' sandboxes run on this machine)."""
    return any(p.info["cmdline"] == argv for p in psutil.process_iter(["cmdline"]))


def run(client: SandboxClient, command: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", {"command": command}))
    return result


def test_a_worker_killed_mid_call_loses_the_call_not_the_session(
    cloud: Cloud, sbx_home: Path, start_worker: Any, external_redis_url: str
) -> None:
    backend, fake_env, sandboxes = cloud
    # An external broker: an embedded one would go with the worker that started it.
    redis.Redis.from_url(external_redis_url).flushdb()
    env = {"SBX_BACKEND": backend, "SBX_ALLOWED_BACKENDS": f"local,{backend}",
           "SBX_LOST_AFTER": "2", "SBX_HEARTBEAT_INTERVAL": "0.2", **fake_env}  # fmt: skip
    # A duration of this test's own: the fakes' sandboxes run on this machine, beside
    # other tests' commands.
    nap = str(100_000 + secrets.randbelow(800_000))
    first = start_worker(external_redis_url, **env)
    settings = settings_for(sbx_home, external_redis_url, lost_after=2.0)
    with SandboxClient(session_id=SESSION, backend=backend, settings=settings) as client:
        assert run(client, "cd /tmp && export KEPT=1")["exit_code"] == 0
        answer: list[str] = []
        call = threading.Thread(
            target=lambda: answer.append(client.tool_call("terminal", {"command": f"sleep {nap}"}))
        )
        call.start()
        wait_until(lambda: _running(["sleep", nap]), 60, "the command to run")
        first.stop(signal.SIGKILL)
        call.join(timeout=120)
        assert not call.is_alive()
        lost = json.loads(answer[0])
        assert lost["status"] == "lost", lost
        second = start_worker(external_redis_url, **env)
        after = run(client, f'echo "$KEPT in $PWD"; ps -eo args | grep -c "[s]leep {nap}"')
        assert (after["exit_code"], after["output"]) == (1, "1 in /tmp\n0\n"), after
        assert after.get("session_moved") is True, second.log()
        assert not _running(["sleep", nap])
        assert sandboxes() == 1
