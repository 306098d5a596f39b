"""Assertions shared by the detection tests of every family (a helper module, not a conftest).

Each family's test file lists ``DANGEROUS`` (command, key) pairs that need
approval but are not hardline, ``HARDLINE`` pairs that must be blocked,
``OBFUSCATED`` pairs (either kind) and ``ALLOWED`` commands that must pass,
and builds its parametrised tests with :func:`dangerous_test`,
:func:`detected_test` and :func:`allowed_test`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from registry.approval import (
    ALL_PATTERN_KEYS,
    HARDLINE_KEYS,
    detect_dangerous_command,
    detect_hardline_command,
)

Env = Mapping[str, str] | None


def assert_dangerous(command: str, key: str, env: Env = None) -> None:
    """``command`` needs approval for ``key`` and is not hardline."""
    assert key in ALL_PATTERN_KEYS and key not in HARDLINE_KEYS, key
    dangerous, got, description = detect_dangerous_command(command, env=env)
    assert dangerous, repr(command)
    assert got == key, (command, got)
    assert description
    assert detect_hardline_command(command, env=env) == (False, None), repr(command)


def assert_hardline(command: str, key: str, env: Env = None) -> None:
    """``command`` is hardline, reported under ``key``."""
    assert key in HARDLINE_KEYS, key
    hard, description = detect_hardline_command(command, env=env)
    assert hard, repr(command)
    assert description
    dangerous, got, _ = detect_dangerous_command(command, env=env)
    assert dangerous and got == key, (command, got)


def assert_detected(command: str, key: str, env: Env = None) -> None:
    """``command`` is reported under ``key``, hardline exactly when the key is."""
    if key in HARDLINE_KEYS:
        assert_hardline(command, key, env)
    else:
        assert_dangerous(command, key, env)


def assert_allowed(command: str, env: Env = None) -> None:
    """``command`` needs no approval."""
    assert detect_dangerous_command(command, env=env) == (False, None, None), repr(command)
    assert detect_hardline_command(command, env=env) == (False, None), repr(command)


Cases = list[tuple[str, str]]


def dangerous_test(cases: Cases) -> Callable[[str, str], None]:
    """A test over ``cases``: each needs approval for its key, none is hardline."""

    @pytest.mark.parametrize(("command", "key"), cases)
    def test(command: str, key: str) -> None:
        assert_dangerous(command, key)

    return test


def detected_test(cases: Cases) -> Callable[[str, str], None]:
    """A test over ``cases``: each is reported under its key (hardline or not)."""

    @pytest.mark.parametrize(("command", "key"), cases)
    def test(command: str, key: str) -> None:
        assert_detected(command, key)

    return test


def allowed_test(commands: list[str]) -> Callable[[str], None]:
    """A test over ``commands``: none needs approval."""

    @pytest.mark.parametrize("command", commands)
    def test(command: str) -> None:
        assert_allowed(command)

    return test
