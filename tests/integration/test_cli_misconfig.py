"""A wrong setting stops the ``sbx`` CLI with one line naming it and exit status 2.

Each case is one ``sbx`` subprocess (about a second each) and starts no broker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures_workers import sbx
from worker.errors import EXIT_USAGE


def one_line_error(result: object) -> str:
    """The stderr of a CLI run that must have failed with exit 2 and one line."""
    assert getattr(result, "returncode", None) == EXIT_USAGE, result
    stderr: str = getattr(result, "stderr", "")
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sbx: "), stderr
    return lines[0]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        # A typo'd setting silently ignored would leave its default in force.
        (
            b"brokr_url: redis://127.0.0.1:1/0\n",
            "unknown key 'brokr_url' (did you mean 'broker_url'?)",
        ),
        (b"locla: {isolation: none}\n", "unknown key 'locla' (did you mean 'local'?)"),
        (b"local: 5\n", "unknown key 'local'"),
        (b"backend: \xff\xfe\n", "is not UTF-8 text"),
    ],
    ids=["setting-typo", "backend-typo", "backend-not-mapping", "not-utf8"],
)
def test_a_config_yaml_that_cannot_be_used_is_one_line_and_exit_2(
    sbx_home: Path, content: bytes, expected: str
) -> None:
    (sbx_home / "config.yaml").write_bytes(content)
    line = one_line_error(sbx(sbx_home, "doctor", "--json"))
    assert str(sbx_home / "config.yaml") in line and expected in line


def test_a_config_yaml_that_is_a_directory_is_not_ignored(sbx_home: Path) -> None:
    (sbx_home / "config.yaml").mkdir()
    line = one_line_error(sbx(sbx_home, "doctor"))
    assert "config.yaml is not a regular file" in line


@pytest.mark.parametrize(
    ("command", "url", "scheme"),
    [
        # kombu: "KeyError: No such transport: foo" (exit 1), naming no setting
        (("exec", "--", "true"), "foo://127.0.0.1:1", "not foo"),
        # without a scheme kombu takes an AMQP host, retried forever by a worker
        (("doctor",), "127.0.0.1:1", "not (no scheme)"),
    ],
    ids=["exec-unknown-scheme", "doctor-no-scheme"],
)
def test_a_broker_url_that_is_neither_redis_nor_amqp_is_refused(
    sbx_home: Path, command: tuple[str, ...], url: str, scheme: str
) -> None:
    line = one_line_error(sbx(sbx_home, *command, SBX_BROKER_URL=url))
    assert "broker_url" in line and "must be a Redis or AMQP URL" in line and scheme in line


@pytest.mark.parametrize(
    ("command", "setting", "value"),
    [
        # the worker started, said "ready", and failed each call that used the backend
        (("worker",), "SBX_BACKEND", "nosuch"),
        (("worker",), "SBX_ALLOWED_BACKENDS", "local,dokcer"),
        (("doctor",), "SBX_BACKEND", "nosuch"),
    ],
    ids=["worker-backend", "worker-allowed", "doctor-backend"],
)
def test_an_unknown_backend_name_stops_the_worker_before_it_starts(
    sbx_home: Path, command: tuple[str, ...], setting: str, value: str
) -> None:
    line = one_line_error(sbx(sbx_home, *command, **{setting: value}))
    assert f"{setting}: unknown backend" in line and "known: " in line
    assert not (sbx_home / "broker").exists()  # nothing was started
