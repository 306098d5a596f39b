"""The daytona backend on the real SDK against the fake Daytona.

The whole conformance suite, then what is Daytona's own: the create parameters
the service receives, the session shell's terminal, re-attaching after a worker
restart, sandboxes stopped, archived or deleted behind sbx's back, keeping a
sandbox active, closing, and the sweep of orphans by labels.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from environments import conformance
from tests.fixtures_backends import Factory
from tests.fixtures_daytona import daytona_config
from tests.helpers import wait_until

pytest.importorskip("daytona")

from environments.backends.daytona.config import DaytonaConfig
from environments.backends.daytona.environment import DaytonaEnvironment, reap_orphans
from environments.backends.naming import sandbox_name, worker_label
from tests.fakes.daytona import FakeDaytona
from tests.fakes.daytona.store import FakeSandbox


@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_conformance(daytona_factory: Factory, check: str) -> None:
    conformance.CHECKS[check](daytona_factory)


@pytest.fixture
def session() -> str:
    return f"dt-{secrets.token_hex(4)}"


@pytest.fixture
def envs(daytona_fake: FakeDaytona) -> Iterator[Any]:
    """``make(session_id, **config overrides)``; everything made is closed afterwards."""
    made: list[DaytonaEnvironment] = []

    def make(session_id: str, **overrides: Any) -> DaytonaEnvironment:
        env = DaytonaEnvironment(session_id, config=daytona_config(daytona_fake, **overrides))
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def test_sandbox_is_created_with_safe_defaults_and_labels(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    env = envs(session, env={"GREETING": "hi"})
    assert env.exec('echo "$GREETING"').output == "hi\n"
    body = daytona_fake.creates[-1]
    config: DaytonaConfig = env.config
    assert body["name"] == sandbox_name(session, config.fingerprint()) == env.name
    assert body["labels"]["sbx"] == "1" and body["labels"]["sbx.session"] == session
    assert body["labels"]["sbx.worker"] == worker_label()
    assert body["labels"]["sbx.config"] == config.fingerprint()
    assert body["labels"]["sbx.fleet"] == "default"
    assert body["networkBlockAll"] is True
    assert "networkAllowList" not in body or body["networkAllowList"] is None
    assert (body["autoStopInterval"], body["autoArchiveInterval"], body["autoDeleteInterval"]) == (
        15,
        24 * 60,
        7 * 24 * 60,
    )
    assert body["env"] == {"GREETING": "hi"}
    assert "buildInfo" not in body or body["buildInfo"] is None
    # No network inside: the only interface is loopback.
    interfaces = env.exec("tail -n +3 /proc/net/dev | cut -d: -f1").output.split()
    assert interfaces == ["lo"]


def test_image_resources_allowlist_and_ephemeral_reach_the_service(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    env = envs(
        session,
        image="debian:12-slim",
        cpu=2,
        memory=4,
        disk=10,
        network_allow_list=("10.0.0.0/8", "192.168.0.0/16"),
        ephemeral=True,
        auto_stop_interval=5,
        labels={"team": "infra"},
    )
    env.exec("true")
    body = daytona_fake.creates[-1]
    assert body["buildInfo"]["dockerfileContent"].startswith("FROM debian:12-slim")
    assert (body["cpu"], body["memory"], body["disk"]) == (2, 4, 10)
    assert body["networkBlockAll"] is False
    assert body["networkAllowList"] == "10.0.0.0/8,192.168.0.0/16"
    assert (body["autoStopInterval"], body["autoDeleteInterval"]) == (5, 0)
    assert body["labels"]["team"] == "infra"


def test_commands_have_a_pipe_and_no_terminal(envs: Any, session: str) -> None:
    """The PTY is only the transport: no tty on stdout, no controlling terminal to read."""
    env = envs(session)
    assert env.exec("[ -t 1 ] && echo tty || echo pipe").output == "pipe\n"
    result = env.exec("{ exec 3</dev/tty; } 2>/dev/null && echo has-tty || echo no-tty")
    assert result.output == "no-tty\n"
    # Bytes that a terminal would interpret reach the command untouched.
    raw = env.exec(r"printf 'a\r\nb\003c\004d\025\n'; echo end")
    assert raw.output == "a\r\nb\x03c\x04d\x15\nend\n"
    assert env.exec("printf '%s' \"$(printf 'x\\003y')\" | od -An -c").output.split() == [
        "x",
        "003",
        "y",
    ]


def test_a_command_that_kills_the_session_shell_costs_the_next_command_nothing(
    envs: Any, session: str
) -> None:
    """What the PTY's own shells print once the session shell is gone ("Killed", "logout")
    is not taken for the next command's output: that command runs, on a new shell."""
    env = envs(session)
    env.exec("cd /tmp; export KEPT=yes")
    killed = env.exec("kill -9 $$")
    assert "Killed" not in killed.output, killed
    after = env.exec('echo "$KEPT $PWD"')
    assert (after.exit_code, after.output, after.shell_restarted) == (0, "yes /tmp\n", True)


def test_restarted_worker_reattaches_to_the_same_sandbox(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    first = envs(session)
    first.exec("echo kept > ~/file; cd /tmp")
    sandbox_id = first.sandbox_id
    creates = len(daytona_fake.creates)
    # A new worker: a new object, nothing shared but the session id and the config.
    second = envs(session)
    result = second.exec("cat ~/file")
    assert (result.output, result.shell_restarted) == ("kept\n", False)
    assert second.sandbox_id == sandbox_id
    assert len(daytona_fake.creates) == creates


def test_reattaches_by_labels_when_the_name_does_not_match(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    first = envs(session)
    first.exec("echo kept > ~/file")
    first.shell.close()
    daytona_fake.sandbox(first.sandbox_id).name = f"renamed-{session}"
    creates = len(daytona_fake.creates)
    second = envs(session)
    assert second.exec("cat ~/file").output == "kept\n"
    assert second.sandbox_id == first.sandbox_id and len(daytona_fake.creates) == creates


def test_sandbox_stopped_behind_sbxs_back_is_started_and_the_call_says_so(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    env = envs(session)
    env.exec("echo kept > ~/file; cd /tmp; export KEPT=yes")
    daytona_fake.stop(env.sandbox_id)
    result = env.exec('cat ~/file; pwd; echo "$KEPT"')
    assert result.exit_code == 0 and result.shell_restarted, result
    assert "was stopped; it was started again" in result.output
    assert result.output.endswith("kept\n/tmp\nyes\n")
    assert daytona_fake.sandbox(env.sandbox_id).state == "started"
    assert env.exec("echo again").output == "again\n"


def test_archived_sandbox_is_started_by_a_new_worker(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    first = envs(session)
    first.exec("echo kept > ~/file")
    first.shell.close()
    daytona_fake.archive(first.sandbox_id)
    second = envs(session)
    result = second.exec("cat ~/file")
    assert "was archived; it was started again" in result.output
    assert result.output.endswith("kept\n") and second.sandbox_id == first.sandbox_id


def test_sandbox_deleted_behind_sbxs_back_is_recreated_and_the_call_says_so(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    env = envs(session)
    env.exec("cd /tmp")
    old = env.sandbox_id
    daytona_fake.delete(old)
    result = env.exec("echo back")
    assert result.exit_code == 0 and result.shell_restarted
    assert "was gone; a new one was created" in result.output
    assert result.output.endswith("back\n")
    assert env.sandbox_id != old
    assert env.exec("echo again").output == "again\n"


def test_file_calls_start_or_recreate_a_sandbox_that_stopped_or_vanished(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    """A file call is often the first after an idle auto-stop: it starts the sandbox and
    answers, as a command would; the next command says what happened."""
    env = envs(session)
    env.exec("echo kept > /tmp/f")
    log = env.spawn("echo logged", output_path="/tmp/p.out", status_path="/tmp/p.status")
    ended = f"cat {log.status_path} 2>/dev/null"
    wait_until(lambda: env.exec(ended).output == "0", 30, "the background process to end")
    daytona_fake.stop(env.sandbox_id)
    assert env.read_file("/tmp/f") == b"kept\n"
    daytona_fake.stop(env.sandbox_id)
    env.write_file("/tmp/g", b"new")
    daytona_fake.stop(env.sandbox_id)
    assert env.read_output(log.output_path, 0, 100).data == b"logged\n"
    result = env.exec("cat /tmp/g")
    assert "was stopped; it was started again" in result.output, result
    assert result.output.endswith("new") and result.shell_restarted
    old = env.sandbox_id
    daytona_fake.delete(old)
    with pytest.raises(FileNotFoundError):
        env.read_file("/tmp/f")  # asked of the new sandbox, where it is not
    assert env.sandbox_id != old
    assert "was gone; a new one was created" in env.exec("true").output


def test_touch_keeps_an_idle_sandbox_from_auto_stopping(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    kept, idle = envs(session), envs(session + "-idle")
    for env in (kept, idle):
        env.exec("true")
        env.shell.close()  # no terminal open: only explicit activity counts now
        sandbox = daytona_fake.sandbox(env.sandbox_id)
        wait_until(partial(_no_streams, sandbox), 30, "the fake to see the terminal closed")
    assert daytona_fake.advance(10 * 60) == []
    refreshes = daytona_fake.sandbox(kept.sandbox_id).activity_refreshes
    kept.touch()
    assert daytona_fake.sandbox(kept.sandbox_id).activity_refreshes == refreshes + 1
    changes = dict(daytona_fake.advance(10 * 60))
    assert changes.get(idle.sandbox_id) == "stopped"
    assert kept.sandbox_id not in changes
    assert daytona_fake.sandbox(kept.sandbox_id).state == "started"
    # A restarted worker keeps the session's sandbox alive before its first call.
    envs(session).touch()
    assert daytona_fake.sandbox(kept.sandbox_id).activity_refreshes == refreshes + 2


def _no_streams(sandbox: FakeSandbox) -> bool:
    return sandbox.streams == 0


def test_close_deletes_stops_or_keeps_as_configured(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    ids = {}
    for action in ("delete", "stop", "keep"):
        env = envs(f"{session}-{action}", on_close=action)
        env.exec("true")
        ids[action] = env.sandbox_id
        env.close()
        env.close()
    assert daytona_fake.store.matching({"sbx.session": f"{session}-delete"}) == []
    assert daytona_fake.sandbox(ids["stop"]).state == "stopped"
    assert daytona_fake.sandbox(ids["keep"]).state == "started"
    daytona_fake.delete(ids["stop"])
    daytona_fake.delete(ids["keep"])


def test_reap_orphans_deletes_idle_sandboxes_nobody_keeps(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    claimed, orphan, stopped = envs(session + "-a"), envs(session + "-b"), envs(session + "-c")
    for env in (claimed, orphan, stopped):
        env.exec("true")
    daytona_fake.stop(stopped.sandbox_id)
    config = claimed.config
    scope = {"sbx.worker": worker_label()}

    def keep(session_id: str) -> bool:
        return session_id == session + "-a"

    # Just used: nothing is idle.
    assert reap_orphans(config, 3600, keep, labels=scope) == []
    removed = reap_orphans(config, 3600, keep, now=time.time() + 7200, labels=scope)
    assert sorted(removed) == sorted([orphan.name, stopped.name])
    assert daytona_fake.sandbox(claimed.sandbox_id).state == "started"
    for gone in (orphan, stopped):
        assert daytona_fake.store.matching({"sbx.session": gone.session_id}) == []


def test_the_orphan_sweep_deletes_only_its_own_fleets_sandboxes(
    daytona_fake: FakeDaytona, envs: Any, session: str
) -> None:
    """Two deployments sharing an organization: each one's sweep leaves the other's idle
    sandboxes alone, and one session id in both gets two sandboxes."""
    ours, theirs = envs(session, fleet=f"blue-{session}"), envs(session, fleet=f"green-{session}")
    default = envs(session)
    for env in (ours, theirs, default):
        env.exec("true")
    assert len({ours.sandbox_id, theirs.sandbox_id, default.sandbox_id}) == 3
    assert daytona_fake.sandbox(theirs.sandbox_id).labels["sbx.fleet"] == f"green-{session}"
    later = time.time() + 7200
    removed = reap_orphans(ours.config, 3600, lambda session_id: False, now=later)
    assert removed == [ours.name]
    for kept in (theirs, default):
        assert daytona_fake.sandbox(kept.sandbox_id).state == "started"
    this_test = {"sbx.session": session}  # the default fleet is every other test's too
    swept = reap_orphans(default.config, 3600, lambda sid: False, now=later, labels=this_test)
    assert swept == [default.name]
    assert daytona_fake.sandbox(theirs.sandbox_id).state == "started"
