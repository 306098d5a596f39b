"""The sandbox environment is an allowlist: a baseline plus what the operator forwards."""

from __future__ import annotations

from environments.sanitize import (
    SANDBOX_BASELINE,
    client_environment,
    is_secret_name,
    sandbox_environment,
)

WORKER = {
    "PATH": "/usr/bin",
    "HOME": "/home/w",
    "LANG": "C.UTF-8",
    "TZ": "UTC",
    "DATABASE_URL": "postgres://u:p@db/x",
    "DB_PASS": "p",
    "MASTER_KEY": "m",
    "RABBITMQ_URL": "amqp://u:p@mq//",
    "SBX_SECRET_KEY": "k",
    "SOMETHING_ELSE": "v",
}


def test_only_the_baseline_and_forwarded_names_pass() -> None:
    env = sandbox_environment(WORKER, ("SOMETHING_ELSE", "NOT_SET"), {"TERM": "xterm"})
    assert env == {"PATH": "/usr/bin", "HOME": "/home/w", "LANG": "C.UTF-8", "TZ": "UTC",
                   "SOMETHING_ELSE": "v", "TERM": "xterm"}  # fmt: skip
    assert set(SANDBOX_BASELINE) >= {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER",
                                     "LOGNAME", "SHELL", "TMPDIR"}  # fmt: skip


def test_forwarding_is_explicit_even_for_credentials() -> None:
    assert sandbox_environment(WORKER, ("DB_PASS",))["DB_PASS"] == "p"


def test_clients_get_everything_but_what_looks_like_a_credential() -> None:
    env = client_environment(WORKER)
    assert set(env) == {"PATH", "HOME", "LANG", "TZ", "SOMETHING_ELSE"}
    for name in ("DATABASE_URL", "DB_PASS", "MASTER_KEY", "RABBITMQ_URL", "SBX_SECRET_KEY"):
        assert is_secret_name(name)
