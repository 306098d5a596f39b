"""A real OpenSSH server on 127.0.0.1 for tests and benchmarks: a fresh host key, user
key, ``authorized_keys`` and ``known_hosts`` each time (:func:`running_sshd`).

Run as root, it logs sessions in as an account of their own (:data:`TEST_ACCOUNT`,
which ``tests/services/backends.sh`` creates), never as root: sessions run as a plain
user, as they do on a real host, and nothing of the machine's root account (its rc
files, its processes) is theirs to touch. Run as another user, it logs in as that user.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class SSHServer:
    """A real OpenSSH server on 127.0.0.1 that trusts ``key_file`` for ``user``."""

    host: str
    port: int
    user: str
    key_file: str
    known_hosts: str
    host_key_pub: str
    directory: str
    pid: int
    scratch: str
    """A directory both this process and the account may use (files to wait on)."""


TEST_ACCOUNT = "sbx-ssh"
"""The account sessions log in as when the tests run as root."""


def _account() -> str:
    if os.geteuid() != 0:
        return getpass.getuser()
    try:
        pwd.getpwnam(TEST_ACCOUNT)
    except KeyError:
        raise ServiceUnavailable(
            f"the ssh tests' account {TEST_ACCOUNT} does not exist "
            "(sh tests/services/backends.sh creates it)"
        ) from None
    return TEST_ACCOUNT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_sshd(directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    port = _free_port()
    config = directory / "sshd_config"
    config.write_text(
        f"""Port {port}
ListenAddress 127.0.0.1
HostKey {directory}/host_ed25519
PidFile {directory}/sshd.pid
AuthorizedKeysFile {directory}/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
StrictModes no
PermitRootLogin yes
MaxSessions 64
MaxStartups 64:30:128
ClientAliveInterval 0
LogLevel ERROR
Subsystem sftp internal-sftp
# The test account's ~/.bashrc stays out: bash reads it for a command sshd runs only at
# SHLVL 0. A machine's rc file can make every login wait (pyenv's rehash waits up to 60 s
# on a lock file, which a test that kills sshd mid-login leaves behind).
SetEnv SHLVL=1
"""
    )
    proc = subprocess.Popen(
        [sshd, "-D", "-e", "-f", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(directory / "sshd.log", "wb"),  # noqa: SIM115
    )
    return proc, port


def wait_listening(port: int, proc: subprocess.Popen[bytes]) -> bool:
    # sshd -D binds before it accepts; poll connect() with a bounded number of tries.
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with socket.socket() as s, contextlib.suppress(OSError):
            s.settimeout(0.2)
            s.connect(("127.0.0.1", port))
            return True
        time.sleep(0.02)
    return False


class ServiceUnavailable(RuntimeError):
    """A real service needed by a test or benchmark cannot be started here."""


@contextlib.contextmanager
def running_sshd() -> Iterator[SSHServer]:
    """Start sshd with a fresh host key, user key, authorized_keys and known_hosts; stop it after.

    Raises :class:`ServiceUnavailable` when OpenSSH is missing or does not start.
    """
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd) or not shutil.which("ssh-keygen"):
        raise ServiceUnavailable("OpenSSH server not installed (apt-get install openssh-server)")
    if os.geteuid() == 0:
        # sshd running as root insists on its privilege separation directory.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    user = _account()
    directory = Path(tempfile.mkdtemp(prefix="sbx-sshd-"))
    # sshd reads authorized_keys as the user logging in; private keys stay 0600.
    os.chmod(directory, 0o755)
    for name in ("host_ed25519", "user_ed25519"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / name)],
            check=True,
        )
    (directory / "authorized_keys").write_text((directory / "user_ed25519.pub").read_text())
    os.chmod(directory / "authorized_keys", 0o644)
    scratch = directory / "scratch"
    scratch.mkdir()
    os.chmod(scratch, 0o1777)
    host_pub = (directory / "host_ed25519.pub").read_text().split()
    proc, port = _start_sshd(directory)
    try:
        if not wait_listening(port, proc):
            log = (directory / "sshd.log").read_text(errors="replace")
            raise ServiceUnavailable(f"sshd did not start: {log.strip()[:500]}")
        known = directory / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
        yield SSHServer(
            host="127.0.0.1",
            port=port,
            user=user,
            key_file=str(directory / "user_ed25519"),
            known_hosts=str(known),
            host_key_pub=f"{host_pub[0]} {host_pub[1]}",
            directory=str(directory),
            pid=proc.pid,
            scratch=str(scratch),
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(directory, ignore_errors=True)


def drop_connections(server: SSHServer, *, listener_too: bool = False) -> None:
    """SIGKILL the server side of every connection ``server`` serves (its sshd processes,
    privileged and unprivileged): each connection drops, and the account's processes run
    on. With ``listener_too`` the listening sshd goes first: no connection comes in while
    the others go, and the host is unreachable until sshd is started again."""
    listener = psutil.Process(server.pid)
    daemons = [p for p in listener.children(recursive=True) if _is_sshd(p)]
    if listener_too:  # its children are found through it: while it lives
        listener.kill()
    for daemon in daemons:
        with contextlib.suppress(psutil.NoSuchProcess):
            daemon.kill()
    psutil.wait_procs([listener, *daemons] if listener_too else daemons, timeout=30)


def _is_sshd(process: psutil.Process) -> bool:
    try:
        return process.name().startswith("sshd")
    except psutil.NoSuchProcess:
        return False


def worker_ssh_env(server: SSHServer) -> dict[str, str]:
    """The settings of a worker whose sessions run on ``server`` (no agent)."""
    return {
        "SBX_BACKEND": "ssh",
        "SBX_SSH_HOST": server.host,
        "SBX_SSH_PORT": str(server.port),
        "SBX_SSH_USER": server.user,
        "SBX_SSH_KEY_FILE": server.key_file,
        "SBX_SSH_KNOWN_HOSTS": server.known_hosts,
        "SBX_SSH_USE_AGENT": "false",
    }
