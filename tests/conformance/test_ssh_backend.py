"""ssh-specific behaviour against a real OpenSSH server on 127.0.0.1."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

import psutil
import pytest

from environments.backends.ssh.channel import POOL
from environments.backends.ssh.environment import HostKeyNotVerified, SSHConfig, SSHEnvironment
from environments.errors import BackendUnavailable
from tests.fixtures_backends import SSHServer, ssh_config_for
from tests.helpers import wait_until
from tests.sshd import drop_connections
from worker.service.backends import backend_config
from worker.settings import Settings


def _config(server: SSHServer, **overrides: object) -> SSHConfig:
    config = ssh_config_for(server, **overrides)
    assert isinstance(config, SSHConfig)
    return config


def _own_known_hosts(server: SSHServer, tmp_path: Path, content: str | None = None) -> str:
    """A known_hosts file at a new path, so the test gets connections of its own."""
    path = tmp_path / f"known_hosts-{secrets.token_hex(3)}"
    if content is None:
        shutil.copy(server.known_hosts, path)
    else:
        path.write_text(content)
    return str(path)


def test_unknown_host_key_is_refused(sshd_server: SSHServer, tmp_path: Path) -> None:
    known = _own_known_hosts(sshd_server, tmp_path, content="")
    env = SSHEnvironment("ssh-unknown", config=_config(sshd_server, known_hosts=known))
    with pytest.raises(HostKeyNotVerified):
        env.exec("echo should-not-run")


def test_changed_host_key_is_refused(sshd_server: SSHServer, tmp_path: Path) -> None:
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kind, blob = (tmp_path / "other_key.pub").read_text().split()[:2]
    known = _own_known_hosts(
        sshd_server, tmp_path, content=f"[127.0.0.1]:{sshd_server.port} {kind} {blob}\n"
    )
    env = SSHEnvironment("ssh-changed", config=_config(sshd_server, known_hosts=known))
    with pytest.raises(HostKeyNotVerified):
        env.exec("echo should-not-run")


def test_missing_known_hosts_is_an_error(sshd_server: SSHServer, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    with pytest.raises(BackendUnavailable, match="known_hosts"):
        SSHEnvironment("ssh-missing", config=_config(sshd_server, known_hosts=missing))


def test_settings_come_from_the_environment(
    sshd_server: SSHServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SBX_SSH_HOST", "127.0.0.1")
    monkeypatch.setenv("SBX_SSH_PORT", str(sshd_server.port))
    monkeypatch.setenv("SBX_SSH_KEY_FILE", sshd_server.key_file)
    monkeypatch.setenv("SBX_SSH_KNOWN_HOSTS", sshd_server.known_hosts)
    monkeypatch.setenv("SBX_SSH_USE_AGENT", "false")
    config = backend_config(Settings(), "ssh")
    env = SSHEnvironment("ssh-from-env", config)
    try:
        assert env.exec("echo via-env").output == "via-env\n"
        assert SSHEnvironment.availability(config)[0]
    finally:
        env.close()


def test_channels_per_connection_are_capped(sshd_server: SSHServer, tmp_path: Path) -> None:
    known = _own_known_hosts(sshd_server, tmp_path)
    config = _config(sshd_server, known_hosts=known, max_channels_per_connection=2)
    envs = [SSHEnvironment(f"ssh-cap-{i}", config=config) for i in range(3)]
    try:
        for i, env in enumerate(envs):
            assert env.exec(f"echo {i}").output == f"{i}\n"
        in_use = POOL.stats(config.key())
        assert sorted(in_use) == [1, 2], in_use  # two connections, none above the cap
    finally:
        for env in envs:
            env.close()
    assert sum(POOL.stats(config.key())) == 0


def test_dropped_connection_reconnects_and_restores_state(
    sshd_server: SSHServer, tmp_path: Path
) -> None:
    known = _own_known_hosts(sshd_server, tmp_path)
    env = SSHEnvironment("ssh-drop", config=_config(sshd_server, known_hosts=known))
    try:
        where = env.exec("mktemp -d").output.strip()
        env.exec(f"cd '{where}'; export SBX_SSH_KEPT='x y'")
        # Kill the server side of every connection: the TCP connections drop.
        drop_connections(sshd_server)
        channel = env._channel
        assert channel is not None
        wait_until(lambda: channel.peer_gone, 30, "the client to notice the dropped connection")
        result = env.exec('pwd; echo "$SBX_SSH_KEPT"')
        assert result.output == f"{where}\nx y\n"
        assert result.shell_restarted and result.exit_code == 0
    finally:
        env.close()


def test_timeout_kills_the_remote_group(sshd_server: SSHServer) -> None:
    env = SSHEnvironment("ssh-timeout", config=_config(sshd_server))
    try:
        tag = str(70000 + secrets.randbelow(9999))
        result = env.exec(f"sh -c 'sleep {tag}1' & sleep {tag}2", timeout=0.5)
        assert result.exit_code == 124 and result.timed_out
        # sshd runs on this machine, so the remote processes are visible here too.
        survivors = [
            p.info["cmdline"]
            for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"] and any(tag in part for part in p.info["cmdline"])
        ]
        assert survivors == []
        assert env.exec("echo usable").output == "usable\n"
    finally:
        env.close()


def test_sessions_run_as_the_servers_account_never_as_root(sshd_server: SSHServer) -> None:
    """The test sshd logs sessions in as a plain account when the tests run as root, as a
    real host would: what the suite checks holds without root's powers."""
    env = SSHEnvironment("ssh-account", config=_config(sshd_server))
    try:
        who = env.exec("id -un; id -u").output.split()
    finally:
        env.close()
    assert who[0] == sshd_server.user
    if os.geteuid() == 0:
        assert who == ["sbx-ssh", str(pwd.getpwnam("sbx-ssh").pw_uid)]
        assert who[1] != "0"
