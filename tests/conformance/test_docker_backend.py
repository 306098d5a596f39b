"""Docker-specific behaviour on a real engine: hardening, reconnect, recreate, cleanup, reaping."""

from __future__ import annotations

import secrets
import time
from typing import Any

import pytest

from environments.backends.docker.config import DockerConfig, container_name
from environments.backends.docker.environment import DockerEnvironment
from environments.backends.docker.orphans import reap_orphans
from environments.errors import SandboxError, ServiceUnreachable
from tests.fixtures_backends import DOCKER_IMAGES, KILL_GRACE

IMAGE = DOCKER_IMAGES["busybox"]


@pytest.fixture
def config() -> DockerConfig:
    return DockerConfig(image=IMAGE, kill_grace=KILL_GRACE)


@pytest.fixture
def session() -> str:
    return f"dk-{secrets.token_hex(4)}"


def _env(client: Any, session: str, config: DockerConfig) -> DockerEnvironment:
    return DockerEnvironment(session, config=config, client=client)


def test_container_is_hardened_and_labelled(
    docker_client_ready: Any, config: DockerConfig, session: str
) -> None:
    env = _env(docker_client_ready, session, config)
    try:
        assert env.exec("id -u; id -g").output == "65534\n65534\n"
        info = docker_client_ready.api.inspect_container(env.container_id)
        host = info["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["CapDrop"] == ["ALL"]
        assert host["SecurityOpt"] == ["no-new-privileges"]
        assert host["PidsLimit"] == config.pids_limit
        assert host["Memory"] == 2 * 1024**3
        assert host["NanoCpus"] == 1_000_000_000
        assert host["ReadonlyRootfs"] is True
        assert set(host["Tmpfs"]) == {"/workspace", "/tmp"}
        labels = info["Config"]["Labels"]
        assert labels["sbx"] == "1" and labels["sbx.session"] == session
        assert ":" in labels["sbx.worker"]
        assert info["Name"] == "/" + container_name(session, config)
        # Read-only root, writable workdir, no network interface but loopback.
        assert env.exec("touch /etc/x").exit_code != 0
        assert env.exec("pwd; touch f && echo ok").output == "/workspace\nok\n"
        assert env.exec("ls /sys/class/net").output.split() == ["lo"]
    finally:
        env.close()


def test_settings_are_configurable(docker_client_ready: Any, session: str) -> None:
    config = DockerConfig(
        image=IMAGE, user="1234:1234", pids_limit=64, memory="256m", cpus=0.5, read_only=False
    )
    env = _env(docker_client_ready, session, config)
    try:
        assert env.exec("id -u").output == "1234\n"
        host = docker_client_ready.api.inspect_container(env.container_id)["HostConfig"]
        assert (host["PidsLimit"], host["Memory"], host["NanoCpus"]) == (
            64,
            256 * 1024**2,
            5 * 10**8,
        )
        assert host["ReadonlyRootfs"] is False
    finally:
        env.close()


def test_restarted_worker_reattaches_by_name(
    docker_client_ready: Any, config: DockerConfig, session: str
) -> None:
    first = _env(docker_client_ready, session, config)
    try:
        first.exec("echo kept > /workspace/file")
        cid = first.container_id
        # A new worker (new object, no shared state) finds the same container...
        second = _env(docker_client_ready, session, config)
        assert second.exec("cat /workspace/file").output == "kept\n"
        assert second.container_id == cid
        second.shell.close()
        # ...and starts it again when it was stopped, saying what the stop took.
        docker_client_ready.api.stop(cid, timeout=1)
        third = _env(docker_client_ready, session, config)
        result = third.exec("echo up")
        assert third.container_id == cid and result.output.endswith("]\nup\n")
        assert "container had stopped and was started again" in result.output
    finally:
        first.close()


def test_reattaches_by_label_when_the_name_changed(
    docker_client_ready: Any, config: DockerConfig, session: str
) -> None:
    first = _env(docker_client_ready, session, config)
    try:
        first.exec("echo kept > /workspace/file")
        docker_client_ready.api.rename(first.container_id, f"renamed-{session}")
        second = _env(docker_client_ready, session, config)
        assert second.exec("cat /workspace/file").output == "kept\n"
        assert second.container_id == first.container_id
    finally:
        docker_client_ready.api.remove_container(first.container_id, force=True)


def test_vanished_container_is_recreated_and_the_call_says_so(
    docker_client_ready: Any, config: DockerConfig, session: str
) -> None:
    env = _env(docker_client_ready, session, config)
    try:
        env.exec("cd /tmp")
        old = env.container_id
        docker_client_ready.api.remove_container(old, force=True)
        result = env.exec("echo back")
        assert result.exit_code == 0 and result.shell_restarted
        assert result.output.endswith("back\n") and "container was gone" in result.output
        assert env.container_id != old
        assert env.exec("echo again").output == "again\n"
    finally:
        env.close()


def test_failed_start_leaves_nothing_behind(docker_client_ready: Any, session: str) -> None:
    config = DockerConfig(image=IMAGE, user="no-such-user")
    env = _env(docker_client_ready, session, config)
    with pytest.raises(SandboxError):
        env.exec("echo hi")
    name = container_name(session, config)
    assert docker_client_ready.api.containers(all=True, filters={"name": name}) == []
    assert (
        docker_client_ready.api.containers(all=True, filters={"label": f"sbx.session={session}"})
        == []
    )


def test_missing_image_is_reported(docker_client_ready: Any, session: str) -> None:
    env = _env(docker_client_ready, session, DockerConfig(image="sbx-no-such-image:never"))
    with pytest.raises(SandboxError, match="not on this engine"):
        env.exec("true")


def test_timeout_kills_tree_seen_from_the_engine(
    docker_client_ready: Any, config: DockerConfig, session: str
) -> None:
    env = _env(docker_client_ready, session, config)
    try:
        result = env.exec("sh -c 'sleep 4242' & sleep 4243", timeout=0.5)
        assert result.exit_code == 124
        top = docker_client_ready.api.top(env.container_id)
        commands = [" ".join(p) for p in top["Processes"]]
        assert not [c for c in commands if "sleep 424" in c], commands
        assert env.exec("echo usable").output == "usable\n"
    finally:
        env.close()


def test_close_removes_the_container(
    docker_client_ready: Any, config: DockerConfig, session: str
) -> None:
    env = _env(docker_client_ready, session, config)
    env.exec("true")
    env.close()
    env.close()
    assert (
        docker_client_ready.api.containers(all=True, filters={"label": f"sbx.session={session}"})
        == []
    )


def test_the_orphan_sweep_removes_only_its_own_fleets_containers(
    docker_client_ready: Any, config: DockerConfig, session: str
) -> None:
    # Two deployments on one engine: each sweep (here with every container past the
    # idle limit) removes its own fleet's orphans and leaves the other's alone.
    ours = config.model_copy(update={"fleet": f"ours-{session}"})
    theirs = config.model_copy(update={"fleet": f"theirs-{session}"})
    mine = _env(docker_client_ready, session, ours)
    other = _env(docker_client_ready, session, theirs)
    try:
        mine.exec("true")
        other.exec("true")
        labels = docker_client_ready.api.inspect_container(other.container_id)["Config"]["Labels"]
        assert labels["sbx.fleet"] == f"theirs-{session}"
        assert DockerEnvironment.reap_orphans(ours, -1, lambda session_id: False) == [mine.name]
        assert other.exec("echo still here").output == "still here\n"
    finally:
        mine.close()
        other.close()


def test_reap_orphans_removes_idle_containers_running_or_not(
    docker_client_ready: Any, config: DockerConfig, session: str
) -> None:
    running = _env(docker_client_ready, session, config)
    stopped = _env(docker_client_ready, session + "-stopped", config)
    try:
        running.exec("true")
        stopped.exec("true")
        docker_client_ready.api.stop(stopped.container_id, timeout=1)
        scope = {
            "sbx.worker": docker_client_ready.api.inspect_container(running.container_id)["Config"][
                "Labels"
            ]["sbx.worker"]
        }
        # Both were just used: not idle.
        assert reap_orphans(3600, client=docker_client_ready, labels=scope) == []
        later = time.time() + 7200
        removed = reap_orphans(3600, now=later, client=docker_client_ready, labels=scope)
        assert sorted(removed) == sorted([running.name, stopped.name])
        assert (
            docker_client_ready.api.containers(
                all=True, filters={"label": f"sbx.session={session}"}
            )
            == []
        )
    finally:
        running.close()
        stopped.close()


def test_heartbeat_moves_the_idle_clock(docker_client_ready: Any, session: str) -> None:
    config = DockerConfig(image=IMAGE, heartbeat_interval=0)
    env = _env(docker_client_ready, session, config)
    try:
        env.exec("true")
        env.exec("true")  # second call writes the heartbeat (interval 0)
        assert (
            env.exec(
                "while [ ! -e /tmp/.sbx-heartbeat ]; do sleep 0.05; done; echo y", timeout=30
            ).output
            == "y\n"
        )
        from environments.backends.docker.orphans import last_activity

        info = docker_client_ready.api.inspect_container(env.container_id)
        heartbeat = int(env.exec("stat -c %Y /tmp/.sbx-heartbeat").output)
        assert last_activity(docker_client_ready.api, info, config.heartbeat_path) >= heartbeat
    finally:
        env.close()


def test_a_helper_command_that_does_not_answer_is_given_up(
    docker_client_ready: Any, config: DockerConfig, session: str
) -> None:
    # A helper blocked in the container (here opening a FIFO nobody writes, as a file
    # swapped for one after the helper checked it would) ends the operation at the
    # deadline with a clear error; the session carries on.
    env = _env(docker_client_ready, session, config)
    try:
        assert env.exec("mkfifo /tmp/stuck && echo made").output == "made\n"
        env.helper_deadline = 1.0
        with pytest.raises(ServiceUnreachable, match="did not answer"):
            env._helper("cat /tmp/stuck", [])
        env.helper_deadline = DockerEnvironment.helper_deadline
        assert env._helper("echo answered", []) == (0, b"answered\n")
        assert env.exec("echo alive").output == "alive\n"
    finally:
        env.close()
