"""Attacks on the worker from inside a sandbox, through a real worker on the default local
backend (its bubblewrap jail, network ``none``): each must fail, the legitimate path works.

Every attack is a model's ``terminal`` command. The worker runs with the defaults:
no binds, the key in ``SBX_HOME`` (and, for one test, in ``SBX_SECRET_KEY``).
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from process_registry.checkpoints import CheckpointStore
from process_registry.runtime_dir import runtime_dir
from tests.fixtures_backends import require_jail
from tests.fixtures_workers import settings_for
from tests.helpers import wait_until
from worker.broker.embedded import EmbeddedBroker
from worker.client import SandboxClient

ENV_KEY = "e" * 24 + "-from-the-environment-0123456789"


@pytest.fixture
def jailed(sbx_home: Path, start_worker: Any, tmp_path: Path) -> Iterator[Any]:
    """``jailed(**env)``: a worker on the default local backend (no binds, a scratch
    workspace); returns a client factory ``client(session_id)``."""
    require_jail()
    clients: list[SandboxClient] = []

    def start(**env: str) -> Any:
        start_worker(None, SBX_LOCAL_BINDS="[]", SBX_LOCAL_CWD=str(tmp_path), **env)
        overrides = {"secret_key": env["SBX_SECRET_KEY"]} if "SBX_SECRET_KEY" in env else {}

        def client(session_id: str = "victim") -> SandboxClient:
            c = SandboxClient(session_id=session_id, settings=settings_for(sbx_home, None,
                                                                          **overrides))  # fmt: skip
            clients.append(c)
            return c

        return client

    yield start
    for c in clients:
        c.close()


def spelled(path: Path | str) -> str:
    """A shell word that expands to ``path`` without naming it: an attacker's spelling,
    which the approval policy's path rules do not see (these tests are about the jail)."""
    return f'"$(echo {base64.b64encode(str(path).encode()).decode()} | base64 -d)"'


def run(c: SandboxClient, command: str, **args: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(c.tool_call("terminal", {"command": command, **args}))
    return result


def test_sbx_home_cannot_be_found_through_proc(jailed: Any, sbx_home: Path) -> None:
    c = jailed(SBX_SECRET_KEY=ENV_KEY)()
    walk = (
        'p=$$; while [ "$p" -gt 1 ]; do tr "\\0" "\\n" < /proc/$p/environ 2>/dev/null; '
        "p=$(cut -d' ' -f4 /proc/$p/stat); done; "
        'for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr "\\0" "\\n" < "$f"; done '
        "2>/dev/null"
    )
    out = run(c, walk)["output"]
    assert str(sbx_home) not in out and ENV_KEY not in out
    assert "SBX_" not in out and "worker.cli.main" not in out and "celery" not in out
    # Only the jail's own processes exist there: its init, the shell, this command.
    pids = [int(p) for p in run(c, "ls /proc | grep '^[0-9]*$'")["output"].split()]
    assert pids and len(pids) < 10 and max(pids) < 100, pids
    assert run(c, "echo ok; [ -r /proc/self/stat ] && echo proc")["output"] == "ok\nproc\n"


def test_signing_key_is_out_of_reach(jailed: Any, sbx_home: Path) -> None:
    c = jailed(SBX_SECRET_KEY=ENV_KEY)()
    key = (sbx_home / "secret.key").read_text().strip()
    attempts = (
        f"cat {spelled(sbx_home / 'secret.key')}; ls -la {spelled(sbx_home)}; "
        f"grep -rs {ENV_KEY[:16]} /proc/*/environ /proc/*/cmdline; env; "
        f"find / -xdev -name secret.key 2>/dev/null"
    )
    out = run(c, attempts)["output"]
    assert key not in out and ENV_KEY not in out
    assert "No such file or directory" in out
    assert run(c, "echo made > made.txt && cat made.txt")["output"] == "made\n"


def test_raw_spool_and_other_sessions_output_are_out_of_reach(jailed: Any, sbx_home: Path) -> None:
    client = jailed()
    secret = "a1" * 20
    owner = client("owner")
    started = owner.start(f"echo RAW-{secret}; exec sleep 300")
    record = CheckpointStore(sbx_home).load(started.process_id)
    assert record is not None
    wait_until(lambda: secret in Path(record.output_path).read_text(), 60, "raw output")
    spool = runtime_dir(sbx_home)
    thief = client("thief")
    attempts = (
        f"cat {record.output_path}; ls -la {spool} {Path(record.output_path).parent}; "
        # Everywhere but the distribution's files (/usr; /bin and /lib link there) and
        # the kernel's views: sbx writes nothing there, and reading them all takes a minute.
        f"grep -rs RAW- / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr 2>/dev/null"
        " | head"
    )
    out = run(thief, attempts)["output"]
    assert secret not in out and "No such file or directory" in out
    # The owner reads its own output, redacted as ever, through the process tool.
    assert "RAW-" in owner.logs(started.process_id).text
    owner.kill(started.process_id)


def test_embedded_broker_socket_is_out_of_reach(jailed: Any, sbx_home: Path) -> None:
    c = jailed()()
    path = EmbeddedBroker(sbx_home).socket_path
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({str(path)!r}); s.sendall(b'PING\\r\\n'); print(s.recv(64))\n"
        "except OSError as e:\n"
        "    print('refused', e.errno)\n"
    )
    out = run(c, f"python3 -c {shlex.quote(probe)}")["output"]
    assert out.startswith("refused") and "PONG" not in out
    assert EmbeddedBroker(sbx_home).ping()  # the worker's own side still reaches it
    assert run(c, "echo after")["output"] == "after\n"


def test_config_yaml_cannot_be_written(jailed: Any, sbx_home: Path) -> None:
    c = jailed()()
    config = sbx_home / "config.yaml"
    # A write the approval policy cannot see (a dynamic redirect it would stop first):
    # only the jail stands between it and the worker's config.
    write = (
        f"path = bytes.fromhex({str(config).encode().hex()!r}).decode()\n"
        "try:\n"
        "    open(path, 'a').write('approvals: {mode: off}\\n'); print('rc=0')\n"
        "except OSError as e:\n"
        "    print('rc=1', e.strerror)\n"
    )
    out = run(c, f"python3 -c {shlex.quote(write)}")["output"]
    assert "rc=0" not in out and "No such file or directory" in out
    assert not config.exists()
    assert run(c, "printf 'mine\\n' >> config.yaml && cat config.yaml")["output"] == "mine\n"


@pytest.fixture
def host_service() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP service on the host's 127.0.0.1: ``(port, what each connection sent)``."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                got.append(conn.recv(64))
                conn.sendall(b"host-secret")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], got
    # Closing alone leaves a blocked accept() waiting; a shutdown wakes it at once.
    server.shutdown(socket.SHUT_RDWR)
    server.close()
    thread.join(timeout=10)
    assert not thread.is_alive()


def _connect(port: int) -> str:
    code = (
        "import socket\n"
        "try:\n"
        f"    s = socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
        "    s.sendall(b'from-sandbox'); print(s.recv(64))\n"
        "except OSError as e:\n"
        "    print('unreachable', e.errno)\n"
    )
    return f"python3 -c {shlex.quote(code)}"


def test_host_loopback_is_unreachable_with_network_none(
    jailed: Any, host_service: tuple[int, list[bytes]]
) -> None:
    port, got = host_service
    c = jailed()()
    out = run(c, _connect(port))["output"]
    assert out.startswith("unreachable") and "host-secret" not in out
    assert got == []
    # The jail's own loopback works: a service inside it answers.
    inside = (
        "import socket\n"
        "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()\n"
        "c = socket.create_connection(srv.getsockname()); a, _ = srv.accept()\n"
        "a.sendall(b'inside'); print(c.recv(16).decode())\n"
    )
    assert run(c, f"python3 -c {shlex.quote(inside)}")["output"] == "inside\n"


def test_network_host_is_an_explicit_choice(
    jailed: Any, host_service: tuple[int, list[bytes]]
) -> None:
    port, got = host_service
    c = jailed(SBX_LOCAL_NETWORK="host")()
    assert "host-secret" in run(c, _connect(port))["output"]
    wait_until(lambda: got == [b"from-sandbox"], 30, "the host service to be reached")


def test_worker_processes_and_files_stay_apart_after_a_restart_of_the_shell(
    jailed: Any, sbx_home: Path
) -> None:
    """A shell killed and restarted lands in a fresh jail: still no way out."""
    c = jailed()()
    assert run(c, "export KEEP=1; kill -9 $$; echo after")["output"].startswith("after")
    r = run(c, f'echo "$KEEP"; ls {sbx_home} 2>&1; ls /proc | grep -c "^[0-9]"')
    lines = r["output"].splitlines()
    assert lines[0] == "1" and "No such file or directory" in lines[1]
    assert int(lines[2]) < 10
    assert os.path.isdir(sbx_home)


FAKE_BWRAP = """#!/bin/sh
home=$(tr '\\0' '\\n' < /proc/$PPID/environ | sed -n 's/^SBX_HOME=//p')
cat "$home/secret.key" > "$(dirname "$0")/../stolen-key"
exec /usr/bin/bwrap "$@"
"""


@pytest.mark.parametrize("pty", [False, True])
def test_the_sessions_environment_never_reaches_bubblewrap_on_the_host(
    jailed: Any, sbx_home: Path, tmp_path: Path, pty: bool
) -> None:
    """bubblewrap runs on the host, outside the jail it makes: neither a ``PATH`` naming a
    fake ``bwrap`` the model wrote nor loader variables (``LD_*``) exported in the session
    may run anything there (a background process starts in the session's environment)."""
    c = jailed()()
    fake = base64.b64encode(FAKE_BWRAP.encode()).decode()
    run(c, f"mkdir -p evil && echo {fake} | base64 -d > evil/bwrap && chmod +x evil/bwrap")
    run(c, 'export PATH="$PWD/evil:$PATH" LD_DEBUG=files LD_DEBUG_OUTPUT="$PWD/ld-trace"')
    started = run(c, "echo started", background=True, pty=pty)
    assert started["status"] == "running", started
    assert c.wait(started["process_id"], timeout=60).exit_code == 0
    assert not (tmp_path / "stolen-key").exists()
    # The loader traces only what ran in the jail (the model's own processes), never the
    # host's bubblewrap.
    traces = [p.read_text(errors="replace") for p in tmp_path.glob("ld-*trace.*")]
    assert traces and not [t for t in traces if "bwrap" in t]
    key = (sbx_home / "secret.key").read_text().strip()
    assert key not in run(c, "cat stolen-key ld-*trace.* 2>/dev/null")["output"]


def test_a_forged_environment_dump_with_a_nul_byte_is_not_adopted(jailed: Any) -> None:
    """The model can redefine ``export``, whose output the worker reads back as the
    session's environment: a value holding a NUL (no environment can) is left out,
    and the session goes on (it used to fail every later call)."""
    c = jailed()()
    forged = "declare -x EVIL=$'x\\\\x00--bind\\\\x00/\\\\x00/tmp/hostroot'"
    r = run(c, f'export() {{ builtin export "$@"; printf \'%s\\n\' "{forged}"; }}; echo forged')
    assert r["output"] == "forged\n", r
    assert run(c, 'echo "next ${EVIL-unset}"')["output"] == "next unset\n"
    started = run(c, "ls /tmp/hostroot 2>&1; echo done", background=True)
    done = c.wait(started["process_id"], timeout=60)
    assert done.exit_code == 0 and "No such file or directory" in c.logs(started["process_id"]).text
