"""SandboxPool: per-session serialisation, de-duplicated creation, idle reaping (injected clock)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from environments.base import Environment
from environments.pool import SandboxPool
from tests.fakes.environment import MemoryEnvironment
from tests.helpers import wait_until


def _thread(target: Callable[[], None]) -> threading.Thread:
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t


def _busy(pool: SandboxPool, key: tuple[str, str]) -> int:
    slot = pool._slots.get(key)
    return slot.busy if slot else 0


def test_calls_of_one_session_are_serialised_and_sessions_run_in_parallel() -> None:
    gate = threading.Event()
    made: list[MemoryEnvironment] = []

    def factory(backend: str, session_id: str) -> Environment:
        env = MemoryEnvironment(session_id, gate=gate if session_id == "s1" else None)
        made.append(env)
        return env

    pool = SandboxPool(factory)
    second_entered = threading.Event()

    def first() -> None:
        with pool.use("s1", "fake") as env:
            env.exec("first")

    def second() -> None:
        with pool.use("s1", "fake") as env:
            second_entered.set()
            env.exec("second")

    t1 = _thread(first)
    wait_until(lambda: bool(made) and made[0].entered.is_set(), 60, "first call running")
    t2 = _thread(second)
    # The second caller has registered and now waits on the session's lock.
    wait_until(lambda: _busy(pool, ("s1", "fake")) == 2, 60, "second call queued")
    assert not second_entered.is_set()
    # Another session is not held up by s1.
    with pool.use("s2", "fake") as other:
        assert other.exec("independent").output == "independent"
    gate.set()
    t1.join(10)
    t2.join(10)
    assert second_entered.is_set()
    s1 = made[0]
    assert s1.max_active == 1
    assert [e.session_id for e in made] == ["s1", "s2"]


def test_concurrent_creation_makes_one_sandbox() -> None:
    release = threading.Event()
    calls: list[str] = []

    def slow_factory(backend: str, session_id: str) -> Environment:
        calls.append(session_id)
        release.wait(30)
        return MemoryEnvironment(session_id)

    pool = SandboxPool(slow_factory)
    got: list[Environment] = []

    def use() -> None:
        with pool.use("s", "fake") as env:
            got.append(env)

    threads = [_thread(use) for _ in range(4)]
    wait_until(lambda: _busy(pool, ("s", "fake")) == 4, 60, "all callers waiting")
    release.set()
    for t in threads:
        t.join(10)
    assert calls == ["s"]
    assert len(got) == 4 and all(env is got[0] for env in got)
    assert len(pool) == 1


def test_idle_sandboxes_are_closed_after_the_lifetime() -> None:
    pool = SandboxPool(lambda b, s: MemoryEnvironment(s), idle_ttl=60)
    with pool.use("s", "fake") as env:
        pass
    assert isinstance(env, MemoryEnvironment)
    used = time.monotonic()
    assert pool.reap_idle(now=used + 30) == 0
    assert env.closed == 0 and pool.get_existing("s", "fake") is env
    assert pool.reap_idle(now=used + 61) == 1
    assert env.closed == 1 and pool.get_existing("s", "fake") is None
    # A new call gets a fresh sandbox.
    with pool.use("s", "fake") as fresh:
        assert fresh is not env


def test_keep_alive_protects_sandboxes_with_running_processes() -> None:
    running = {("s-busy", "fake")}
    asked: list[tuple[str, str]] = []

    def keep_alive(session_id: str, backend: str) -> bool:
        asked.append((session_id, backend))
        return (session_id, backend) in running

    pool = SandboxPool(lambda b, s: MemoryEnvironment(s), idle_ttl=10, keep_alive=keep_alive)
    envs = {}
    for sid in ("s-busy", "s-idle"):
        with pool.use(sid, "fake") as env:
            envs[sid] = env
    later = time.monotonic() + 100
    assert pool.reap_idle(now=later) == 1
    assert envs["s-idle"].closed == 1  # type: ignore[attr-defined]
    assert envs["s-busy"].closed == 0  # type: ignore[attr-defined]
    assert ("s-busy", "fake") in asked
    running.clear()  # its processes ended
    assert pool.reap_idle(now=later) == 1
    assert envs["s-busy"].closed == 1  # type: ignore[attr-defined]


def test_a_sandbox_in_use_is_never_reaped() -> None:
    pool = SandboxPool(lambda b, s: MemoryEnvironment(s), idle_ttl=1)
    with pool.use("s", "fake") as env:
        assert pool.reap_idle(now=time.monotonic() + 1000) == 0
        assert env.closed == 0  # type: ignore[attr-defined]


def test_close_all_closes_every_sandbox() -> None:
    pool = SandboxPool(lambda b, s: MemoryEnvironment(s))
    envs = []
    for sid in ("a", "b"):
        with pool.use(sid, "fake") as env:
            envs.append(env)
    pool.close_all()
    assert [e.closed for e in envs] == [1, 1]  # type: ignore[attr-defined]
    assert len(pool) == 0


def test_a_failing_factory_does_not_poison_the_slot() -> None:
    attempts: list[int] = []

    def flaky(backend: str, session_id: str) -> Environment:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("engine hiccup")
        return MemoryEnvironment(session_id)

    pool = SandboxPool(flaky)
    with pytest.raises(RuntimeError), pool.use("s", "fake"):
        pass
    with pool.use("s", "fake") as env:
        assert env.exec("ok").output == "ok"


def test_pool_with_the_real_local_backend(tmp_path: object) -> None:
    pool = SandboxPool()
    try:
        with pool.use("real", "local") as env:
            env.exec("export SBX_POOL_V=1")
        with pool.use("real", "local") as env:
            assert env.exec('echo "$SBX_POOL_V"').output == "1\n"
    finally:
        pool.close_all()


def test_an_idle_sandbox_of_a_session_served_elsewhere_is_let_go_not_removed() -> None:
    made: dict[str, MemoryEnvironment] = {}

    def factory(backend: str, session_id: str) -> Environment:
        made[session_id] = MemoryEnvironment(session_id)
        return made[session_id]

    released: list[tuple[str, str]] = []
    pool = SandboxPool(
        factory,
        idle_ttl=0.0,
        served_elsewhere=lambda session_id: session_id == "moved",
        on_released=lambda session_id, backend: released.append((session_id, backend)),
    )
    for session_id in ("moved", "mine"):
        with pool.use(session_id, "memory") as env:
            env.exec("true")
    assert pool.reap_idle() == 2
    assert (made["moved"].detached, made["moved"].closed) == (1, 0)
    assert (made["mine"].detached, made["mine"].closed) == (0, 1)
    assert sorted(released) == [("mine", "memory"), ("moved", "memory")]


def test_idle_sandboxes_rest_once_until_used_again() -> None:
    made: list[MemoryEnvironment] = []

    def factory(backend: str, session_id: str) -> Environment:
        made.append(MemoryEnvironment(session_id))
        return made[-1]

    pool = SandboxPool(factory, shell_idle_ttl=10, idle_ttl=3600)
    with pool.use("s", "memory") as env:
        env.exec("true")
    now = time.monotonic()
    assert pool.rest_idle(now + 5) == 0  # not idle long enough
    assert pool.rest_idle(now + 11) == 1
    assert pool.rest_idle(now + 12) == 0  # resting already
    with pool.use("s", "memory") as env:
        env.exec("true")  # used again: it may rest again later
    assert pool.rest_idle(time.monotonic() + 11) == 1
    assert made[0].rested == 2 and made[0].closed == 0 and len(pool) == 1
