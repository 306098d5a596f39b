"""``sbx health`` against real workers: healthy, busy, stalled, cut off from the broker,
absent. Exit 0 only when the worker's consumer answers through the broker in time."""

from __future__ import annotations

import json
import signal
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import free_port, wait_until
from tests.ops_support import OpsWorker, sbx, scrape, tcp_proxy, value
from worker.client import SandboxClient


@pytest.fixture
def home(sbx_home: Path) -> Path:
    from process_registry.sessions import load_or_create_secret

    load_or_create_secret(sbx_home / "secret.key")
    return sbx_home


@pytest.fixture
def workers() -> Any:
    started: list[OpsWorker] = []
    yield started
    for w in started:
        if w.proc is not None and w.proc.poll() is None:
            w.proc.send_signal(signal.SIGCONT)
        w.stop()


def health(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any], str]:
    status, out, err = sbx("health", "--json", "--timeout", "3", *args, env=env)
    return status, json.loads(out) if out.strip() else {}, err


def test_a_worker_answers_and_a_stalled_one_does_not(home: Path, workers: list[OpsWorker]) -> None:
    env = worker_env(home, None)
    status, report, err = health(env)
    assert status == 1 and "no sbx worker runs" in err
    worker = OpsWorker(env, home, "--concurrency", "1").start()
    workers.append(worker)
    worker.wait_healthy()
    status, report, _ = health(env)
    assert status == 0 and report["ok"] is True
    assert [w["worker"] for w in report["workers"]] == [worker.worker_id]
    assert report["workers"][0]["concurrency"] == 1

    # Busy: its only thread runs a long call; the consumer still answers.
    call_id = uuid.uuid4().hex
    answers: list[str] = []
    with SandboxClient(session_id="health-busy", settings=settings_for(home, None)) as client:
        running = threading.Thread(
            target=lambda: answers.append(
                client.tool_call("terminal", {"command": "sleep 600"}, call_id=call_id)
            )
        )
        running.start()
        wait_until(lambda: health(env)[1].get("workers", [{}])[0].get("running") == 1, 60,
                   "the long call to occupy the worker's only thread")  # fmt: skip
        assert health(env)[0] == 0
        client.cancel(call_id)
        running.join(60)
    assert json.loads(answers[0])["status"] == "cancelled"

    # Stalled: the whole process stops; the probe times out, then answers again.
    worker.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    status, report, _ = health(env)
    assert status == 1 and report["workers"][0]["ok"] is False
    assert "no answer within 3 s" in report["workers"][0]["error"]
    worker.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    wait_until(lambda: health(env)[0] == 0, 60, "the resumed worker to answer")

    # An explicit id of a worker that does not exist fails within the deadline.
    status, report, _ = health(env, "--worker", "nohost:1")
    assert status == 1 and report["workers"][0]["worker"] == "nohost:1"


def test_a_worker_cut_off_from_its_broker_fails_until_it_reconnects(
    home: Path, workers: list[OpsWorker], external_redis_url: str
) -> None:
    direct = external_redis_url
    redis.Redis.from_url(direct).flushdb()
    port, metrics_port = free_port(), free_port()
    target = ("127.0.0.1", int(direct.rsplit(":", 1)[1].split("/")[0]))
    with tcp_proxy(target, port) as proxy:
        # The worker reaches the broker through the proxy; its ledger and the probe, directly.
        worker_env_ = worker_env(
            home, f"redis://127.0.0.1:{port}/0", SBX_LEDGER_URL=direct,
            SBX_METRICS_ADDR=f"127.0.0.1:{metrics_port}",
        )  # fmt: skip
        probe_env = worker_env(home, direct)
        worker = OpsWorker(worker_env_, home).start()
        workers.append(worker)
        wait_until(lambda: health(probe_env)[0] == 0, 90, "the worker to answer")
        proxy.cut()
        status, report, _ = health(probe_env)
        assert status == 1, report
        proxy.restore()
        wait_until(lambda: health(probe_env)[0] == 0, 120, "the worker to reconnect")
    assert value(scrape(metrics_port), "sbx_broker_reconnects_total") >= 1


def test_a_dead_broker_fails_the_probe(home: Path, workers: list[OpsWorker]) -> None:
    from tests.helpers import RedisProcess

    server = RedisProcess()
    server.start()
    try:
        env = worker_env(home, server.url)
        worker = OpsWorker(env, home).start()
        workers.append(worker)
        worker.wait_healthy()
        server.kill()
        status, _, err = sbx("health", "--timeout", "3", env=env)
        assert status == 1, err
    finally:
        server.stop()


def test_a_worker_on_rabbitmq_answers_on_its_own_health_queue(
    home: Path, workers: list[OpsWorker], amqp_url: str, external_redis_url: str
) -> None:
    redis.Redis.from_url(external_redis_url).flushdb()
    env = worker_env(home, amqp_url, SBX_LEDGER_URL=external_redis_url)
    worker = OpsWorker(env, home).start()
    workers.append(worker)
    worker.wait_healthy()
    status, report, _ = health(env)
    assert status == 0 and report["workers"][0]["worker"] == worker.worker_id
    worker.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    assert health(env)[0] == 1
    worker.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    wait_until(lambda: health(env)[0] == 0, 60, "the resumed worker to answer")
