"""Remote sandboxes on a fleet (docker on a shared engine, ssh): a session re-attaches to
its sandbox on another worker, background processes outlive their worker and get their
true exit status and receipt from the adopter, reapers leave leased sandboxes alone."""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.fixtures_backends import DOCKER_IMAGES
from tests.fixtures_fleet import Fleet
from tests.helpers import wait_until
from tests.sshd import SSHServer, worker_ssh_env
from worker.client import SandboxClient
from worker.protocol.leases import lease_key

FAST = {"SBX_LOST_AFTER": "3", "SBX_HEARTBEAT_INTERVAL": "0.3"}


def run(client: SandboxClient, command: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", {"command": command}))
    return result


def holder(fleet: Fleet, session_id: str) -> int:
    """Index of the worker holding the session's lease."""
    ledger = redis.Redis.from_url(fleet.ledger_url or fleet.broker_url, decode_responses=True)
    worker_id = ledger.get(lease_key(session_id))
    assert worker_id is not None
    return fleet.index_of(int(str(worker_id).rpartition(":")[2]))


@pytest.fixture
def docker_api(docker_client_ready: Any) -> Iterator[Any]:
    """The engine's API; the containers of this module's sessions (``fl-...``) are removed
    after the test (killed workers leave theirs running)."""
    api = docker_client_ready.api
    yield api
    for c in api.containers(all=True, filters={"label": ["sbx=1"]}):
        if str(c["Labels"].get("sbx.session", "")).startswith("fl-"):
            api.remove_container(c["Id"], force=True)


@pytest.fixture(params=["docker", "ssh"])
def remote_fleet(request: pytest.FixtureRequest, fleet_of: Any) -> Iterator[Fleet]:
    """Three workers serving sessions in docker containers on one engine, or on one host
    over ssh."""
    if request.param == "docker":
        request.getfixturevalue("docker_api")
        env = {"SBX_BACKEND": "docker", "SBX_DOCKER_IMAGE": DOCKER_IMAGES["busybox"]}
        fleet: Fleet = fleet_of(3, **env, **FAST)
        yield fleet
        return
    server: SSHServer = request.getfixturevalue("sshd_server")
    fleet = fleet_of(3, **worker_ssh_env(server), **FAST)
    yield fleet


def test_the_session_moves_with_its_sandbox_reattached(remote_fleet: Fleet) -> None:
    session = "fl-move-" + secrets.token_hex(3)
    client = remote_fleet.client(session)
    scratch = f"/tmp/fleet-{session}"
    made = run(client, f"mkdir -p {scratch} && cd {scratch} && echo data > kept")
    assert made["exit_code"] == 0, made
    made = run(client, "export MARK='kept across'")
    assert made["exit_code"] == 0, made
    first = holder(remote_fleet, session)
    remote_fleet.kill(first)
    moved = run(client, 'echo "$PWD:$MARK"; cat kept')
    assert moved["output"] == f"{scratch}:kept across\ndata\n", moved
    assert moved["session_moved"] is True
    assert holder(remote_fleet, session) != first


def test_a_background_process_outlives_its_worker_and_gets_its_receipt(
    remote_fleet: Fleet,
) -> None:
    session = "fl-proc-" + secrets.token_hex(3)
    client = remote_fleet.client(session)
    gate = f"/tmp/fleet-go-{session}"
    started = client.start(f"while [ ! -e {gate} ]; do sleep 0.1; done; echo done; exit 7")
    remote_fleet.kill(holder(remote_fleet, session))
    # Let the process end only now, through a call that re-homes the session.
    assert run(client, f"touch {gate}")["exit_code"] == 0
    final = client.wait(started.process_id, timeout=60)
    assert (final.status, final.exit_code) == ("exited", 7)
    receipt = client.receipt(started.process_id)
    assert (receipt.exit_code, receipt.status) == (7, "exited")
    assert "done" in receipt.output


def test_reapers_leave_a_leased_sandbox_alone(docker_api: Any, fleet_of: Any) -> None:
    """Every worker sweeps orphans every half second with a one-second idle limit: a
    real orphan of its fleet goes; the sandbox of a session a present worker serves,
    and one of another fleet on the same engine (other tests' containers too), stay."""
    fleet_name = "fl-" + secrets.token_hex(4)
    fleet: Fleet = fleet_of(
        3,
        SBX_BACKEND="docker",
        SBX_DOCKER_IMAGE=DOCKER_IMAGES["busybox"],
        SBX_DOCKER_FLEET=fleet_name,
        SBX_ORPHAN_MAX_IDLE="1",
        SBX_ORPHAN_SWEEP_INTERVAL="0.5",
        **FAST,
    )
    api = docker_api
    session = "fl-leased-" + secrets.token_hex(3)
    client = fleet.client(session)
    assert run(client, "echo hi > /tmp/mine")["exit_code"] == 0
    label = {"label": [f"sbx.session={session}"]}
    mine = [c["Id"] for c in api.containers(filters=label)]
    assert len(mine) == 1

    def idle_container(fleet_label: str) -> str:
        labels = {"sbx": "1", "sbx.session": "fl-orphan-" + secrets.token_hex(3),
                  "sbx.fleet": fleet_label}  # fmt: skip
        made = api.create_container(DOCKER_IMAGES["busybox"], command=["sleep", "3600"],
                                    labels=labels)  # fmt: skip
        api.start(made["Id"])
        return str(made["Id"])

    foreign = idle_container("other-" + fleet_name)
    orphan = idle_container(fleet_name)
    try:
        wait_until(lambda: not api.containers(all=True, filters={"id": orphan}), 120,
                   "the orphan to be swept")  # fmt: skip
        # Sweeps ran on every worker meanwhile: the other fleet's container (idle as
        # long) and the leased session's are intact.
        assert [c["Id"] for c in api.containers(filters={"id": foreign})] == [foreign]
    finally:
        api.remove_container(foreign, force=True)
    assert [c["Id"] for c in api.containers(filters=label)] == mine
    assert run(client, "cat /tmp/mine")["output"] == "hi\n"


def test_a_dead_workers_foreground_command_is_ended_by_another_workers_reaper(
    docker_api: Any, fleet_of: Any
) -> None:
    fleet: Fleet = fleet_of(
        3, SBX_BACKEND="docker", SBX_DOCKER_IMAGE=DOCKER_IMAGES["busybox"], **FAST
    )
    api = docker_api
    session = "fl-stale-" + secrets.token_hex(3)
    client = fleet.client(session)
    assert run(client, "true")["exit_code"] == 0
    (container,) = api.containers(filters={"label": [f"sbx.session={session}"]})
    marker = "sleep 3" + secrets.token_hex(2).translate(str.maketrans("abcdef", "123456"))

    def stale_running() -> bool:
        # The engine answers no process list (null) while the container has none.
        processes = api.top(container["Id"])["Processes"] or []
        return any(marker in " ".join(p) for p in processes)

    def long_call() -> None:
        with contextlib.suppress(Exception):  # its worker is killed under it
            client.tool_call("terminal", {"command": marker}, wait=60)

    caller = threading.Thread(target=long_call, daemon=True)
    caller.start()
    wait_until(stale_running, 60, "the long command to run in the container")
    fleet.kill(holder(fleet, session))
    # No call of the session comes: a surviving worker's reaper declares the call lost,
    # takes the session over and ends the command the dead worker left running.
    wait_until(lambda: not stale_running(), 120, "the stale command to be ended")
    moved = run(client, "echo here")
    assert moved["output"] == "here\n" and moved["session_moved"] is True


def test_a_process_taken_over_is_not_adopted_again_by_its_restarted_worker(
    docker_api: Any, fleet_of: Any
) -> None:
    """Worker A dies; worker B takes A's docker process over from the fleet's copy; A is
    restarted on its home, whose checkpoint still names the process: it must leave it to B
    (one watcher, one receipt), not adopt it a second time."""
    fleet: Fleet = fleet_of(
        2, SBX_BACKEND="docker", SBX_DOCKER_IMAGE=DOCKER_IMAGES["busybox"], **FAST
    )
    session = "fl-once-" + secrets.token_hex(3)
    client = fleet.client(session)
    gate = f"/tmp/fleet-go-{session}"
    started = client.start(f"while [ ! -e {gate} ]; do sleep 0.1; done; echo done; exit 7")
    first = holder(fleet, session)
    other = 1 - first
    ledger = redis.Redis.from_url(fleet.ledger_url or fleet.broker_url, decode_responses=True)
    fleet.kill(first)

    def taken_by_other() -> bool:
        raw = ledger.hget("sbx:checkpoints", started.process_id)
        return raw is not None and json.loads(raw)["writer"]["pid"] == fleet.pid(other)

    wait_until(taken_by_other, 120, "the other worker to take the process over")
    restarted = fleet.start(first)
    wait_until(lambda: "ready on" in restarted.log(), 120, "the restarted worker to be ready")
    (container,) = docker_api.containers(filters={"label": [f"sbx.session={session}"]})
    docker_api.exec_start(docker_api.exec_create(container["Id"], ["touch", gate])["Id"])
    final = client.wait(started.process_id, timeout=60)
    assert (final.status, final.exit_code) == ("exited", 7)
    # The receipt is written before the waiters are released: both homes are settled.
    holding = [
        i
        for i, home in enumerate(fleet.homes)
        if (home / "logs" / "process-results" / f"{started.process_id}.json").exists()
    ]
    assert holding == [other]
    wait_until(
        lambda: not (fleet.homes[first] / "checkpoints" / f"{started.process_id}.json").exists(),
        60,
        "the restarted worker's stale checkpoint to go",
    )
