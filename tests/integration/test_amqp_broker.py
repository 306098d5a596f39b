"""``SBX_BROKER_URL=amqp://`` against a real RabbitMQ and real ``sbx worker`` processes.

Celery messages go through RabbitMQ; sbx's own state (claims, heartbeats,
result mailboxes, process routes) goes to the ledger: the embedded Redis under
``SBX_HOME`` by default, or ``SBX_LEDGER_URL``.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import REPO, short_tmpdir, wait_until
from tests.rabbitmq import RabbitMQProcess
from worker.broker.app import create_app
from worker.broker.connection import resolve_ledger_url
from worker.broker.embedded import EmbeddedBroker
from worker.client import SandboxClient
from worker.protocol.tasks import own_queue_name
from worker.settings import Settings, SettingsError

WAIT = 60.0


def client(home: Path, session: str, broker_url: str, **overrides: Any) -> SandboxClient:
    return SandboxClient(session_id=session, settings=settings_for(home, broker_url, **overrides))


def call(c: SandboxClient, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(c.tool_call(tool, args, wait=WAIT))
    return result


# -- with RabbitMQ --------------------------------------------------------------------------


def test_terminal_calls_keep_session_state_apart(
    sbx_home: Path, amqp_url: str, start_worker: Any, tmp_path: Path
) -> None:
    start_worker(amqp_url)
    with client(sbx_home, "alice", amqp_url) as a, client(sbx_home, "bob", amqp_url) as b:
        # No SBX_LEDGER_URL: the state lives in the embedded Redis under SBX_HOME.
        assert a.ledger_url == EmbeddedBroker(sbx_home).url
        assert a.exec(f"cd {tmp_path} && export AMQP_VAR=alice").exit_code == 0
        assert b.exec("export AMQP_VAR=bob").exit_code == 0
        mine = a.exec('pwd; echo "$AMQP_VAR"; exit 7')
        assert (mine.output, mine.exit_code) == (f"{tmp_path}\nalice\n", 7)
        theirs = b.exec('pwd; echo "$AMQP_VAR"')
        assert theirs.exit_code == 0
        assert theirs.output.splitlines()[1] == "bob"
        assert theirs.output.splitlines()[0] != str(tmp_path)
        timed_out = a.exec("sleep 30", timeout=1)
        assert timed_out.exit_code == 124


def test_background_process_is_driven_through_the_workers_own_queue(
    sbx_home: Path, amqp_url: str, start_worker: Any, rabbitmq: RabbitMQProcess
) -> None:
    start_worker(amqp_url)
    with client(sbx_home, "bg", amqp_url) as c:
        started = call(c, "terminal", {"command": "echo up; exec sleep 300", "background": True})
        assert started["status"] == "running", started
        pid = started["process_id"]
        queue = c.process_queue(pid)
        assert queue is not None and queue.startswith("sbx.w."), queue
        # Declared by the worker (durable, expiring) and consumed by it alone.
        assert rabbitmq.queue_info(queue) == (0, 1)

        def polled_up() -> bool:
            view = call(c, "process", {"action": "poll", "process_id": pid})
            assert view["status"] == "running", view
            return "up" in view.get("output_tail", "")

        wait_until(polled_up, WAIT, "the process's output through poll")
        killed = call(c, "process", {"action": "kill", "process_id": pid})
        assert killed["status"] == "killed", killed
        assert call(c, "process", {"action": "poll", "process_id": pid})["status"] == "killed"
        listed = call(c, "process", {"action": "list"})
        assert pid in json.dumps(listed)


def test_call_without_worker_is_pending_then_collected(
    sbx_home: Path, amqp_url: str, start_worker: Any
) -> None:
    from process_registry.sessions import load_or_create_secret

    load_or_create_secret(sbx_home / "secret.key")
    with client(sbx_home, "early", amqp_url) as c:
        # Published with the call's own time budget (see the same test over Redis).
        message = c.call_message("terminal", {"command": "echo late"})
        c.sender.send_call(message)
        call_id = message.call_id
        pending = json.loads(c.result(call_id, wait=0.5))
        assert (pending["status"], pending["call_id"]) == ("pending", call_id)
        start_worker(amqp_url)  # the message waited in RabbitMQ
        result = json.loads(c.result(call_id, WAIT))
        assert (result["output"], result["exit_code"]) == ("late\n", 0)


def test_killed_worker_turns_the_call_into_lost(
    sbx_home: Path, amqp_url: str, start_worker: Any, tmp_path: Path
) -> None:
    worker = start_worker(amqp_url, SBX_LOST_AFTER="2", SBX_HEARTBEAT_INTERVAL="0.2")
    started = tmp_path / "started"
    with client(sbx_home, "victim", amqp_url, lost_after=2.0) as c:
        answer: list[str] = []
        t = threading.Thread(
            target=lambda: answer.append(
                c.tool_call("terminal", {"command": f"touch {started}; sleep 120"})
            )
        )
        t.start()
        wait_until(started.exists, WAIT, "the command to start")
        assert len(c.ledger.running_calls()) == 1
        worker.stop(signal.SIGKILL)
        t.join(timeout=120)
        assert not t.is_alive()
    result = json.loads(answer[0])
    assert result["status"] == "lost", result
    assert "died" in result["error"]


def test_shared_ledger_serves_a_client_on_another_machine(
    sbx_home: Path,
    amqp_url: str,
    start_worker: Any,
    external_redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = external_redis_url.rsplit("/", 1)[0] + "/5"
    redis.Redis.from_url(ledger).flushdb()
    monkeypatch.setenv("SBX_LEDGER_URL", ledger)  # the fixture's readiness client too
    start_worker(amqp_url, SBX_LEDGER_URL=ledger)
    from process_registry.sessions import SessionSigner, load_or_create_secret

    token = SessionSigner(load_or_create_secret(sbx_home / "secret.key")).token("far")
    elsewhere = short_tmpdir("sbx-elsewhere-")  # another machine: its own, empty SBX_HOME
    settings = Settings(home=elsewhere, broker_url=amqp_url, ledger_url=ledger)
    with SandboxClient(session_id="far", session_token=token, settings=settings) as c:
        result = c.exec("echo far away")
        assert (result.output, result.exit_code) == ("far away\n", 0)
    assert redis.Redis.from_url(ledger).keys("sbx:call:*")  # claims went to the shared Redis
    assert not EmbeddedBroker(elsewhere).ping()
    assert not EmbeddedBroker(sbx_home).ping()


# -- configuration (no RabbitMQ needed) -----------------------------------------------------


def test_ledger_url_defaults_and_errors(tmp_path: Path) -> None:
    embedded = EmbeddedBroker(tmp_path).url

    def ledger(**kw: Any) -> str:
        return resolve_ledger_url(Settings(home=tmp_path, **kw), start_embedded=False)

    assert ledger(broker_url="redis://127.0.0.1:1/3") == "redis://127.0.0.1:1/3"
    assert ledger(broker_url="amqp://guest:guest@127.0.0.1:1//") == embedded
    assert ledger() == embedded
    assert ledger(broker_url="amqp://h//", ledger_url="rediss://r:1/0") == "rediss://r:1/0"
    with pytest.raises(SettingsError, match="SBX_LEDGER_URL must be a Redis URL"):
        ledger(broker_url="amqp://h//", ledger_url="amqp://h//")


def test_a_remote_amqp_broker_with_a_local_ledger_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="worker.broker.connection"):
        resolve_ledger_url(
            Settings(home=tmp_path, broker_url="amqp://u:pw-9d2@rabbit.example//"),
            start_embedded=False,
        )
    assert "SBX_LEDGER_URL" in caplog.text and "pw-9d2" not in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="worker.broker.connection"):
        resolve_ledger_url(
            Settings(home=tmp_path, broker_url="amqp://u:pw@127.0.0.1//"), start_embedded=False
        )
    assert caplog.text == ""


def test_transport_specific_celery_options(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    amqp_app = create_app("amqp://guest:guest@127.0.0.1:1//", settings)
    assert amqp_app.conf.broker_transport_options == {"confirm_publish": True}
    assert not amqp_app.conf.worker_disable_prefetch  # Redis-only in Celery
    assert (amqp_app.conf.task_acks_late, amqp_app.conf.worker_prefetch_multiplier) == (False, 1)
    other_worker = own_queue_name(settings.queue, host="h", pid=1)
    assert amqp_app.amqp.queues[other_worker].no_declare  # its worker declares it
    assert not amqp_app.amqp.queues["sbx"].no_declare
    redis_app = create_app("redis://127.0.0.1:1/0", settings)
    assert redis_app.conf.broker_transport_options == {"ack_emulation": False}
    assert redis_app.conf.worker_disable_prefetch


def _sbx(home: Path, *args: str, **env: str) -> Any:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "worker.cli.main", *args],
        env=worker_env(home, None, **env), cwd=str(REPO),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_doctor_reports_broker_and_ledger_and_bad_ledger_is_one_line(sbx_home: Path) -> None:
    broker = "amqp://guest:hunter2pw@127.0.0.1:1//"
    p = _sbx(sbx_home, "doctor", "--json", SBX_BROKER_URL=broker)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["broker"] == {"url": "amqp://guest:***@127.0.0.1:1//", "embedded": False,
                                "transport": "amqp"}  # fmt: skip
    assert (report["ledger"]["embedded"], report["ledger"]["transport"]) == (True, "redis")
    assert "hunter2pw" not in p.stdout
    for argv in (("worker",), ("exec", "--", "true")):
        p = _sbx(sbx_home, *argv, SBX_BROKER_URL=broker, SBX_LEDGER_URL="amqp://h//",
                 SBX_SECRET_KEY="k" * 32)  # fmt: skip
        assert p.returncode == 2, (argv, p.stderr)
        assert p.stderr.count("\n") == 1 and "SBX_LEDGER_URL must be a Redis URL" in p.stderr
