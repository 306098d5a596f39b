"""Fixtures for the ``vercel_sandbox`` backend: the fake Vercel API and a factory over it.

The fake (``tests/fakes/vercel``) listens on 127.0.0.1 and runs commands for
real in bubblewrap jails, so it needs root, ``bwrap`` and ``nsenter``; missing
ones fail in CI and skip elsewhere, as every real test service does. The SDK
is always handed explicit credentials (the fake's) and never reads the
environment's ``VERCEL_*`` variables.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures_backends import KILL_GRACE, Factory, _Tracker, unavailable


def _require_fake_tools() -> None:
    if importlib.util.find_spec("vercel.sandbox") is None:
        unavailable("the Vercel Sandbox SDK is not installed (pip install 'sbx[vercel]')")
    for tool in ("bwrap", "nsenter"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} not installed (apt-get install bubblewrap util-linux)")
    if os.geteuid() != 0:
        unavailable("the fake Vercel API jails commands with bwrap + nsenter: needs root")


@pytest.fixture
def fake_vercel() -> Iterator[Any]:
    """A fresh fake Vercel Sandbox API (``tests.fakes.vercel.FakeVercel``) for one test."""
    _require_fake_tools()
    from tests.fakes.vercel import FakeVercel

    fake = FakeVercel()
    yield fake
    from environments.backends.vercel.sdk import close_clients

    close_clients()
    fake.stop()


def vercel_config(fake: Any, **overrides: Any) -> Any:
    """A :class:`VercelConfig` pointed at ``fake`` with its credentials (never ambient ones)."""
    from pydantic import SecretStr

    from environments.backends.vercel import VercelConfig
    from tests.fakes.vercel import PROJECT_ID, TEAM_ID, TOKEN

    settings: dict[str, Any] = {
        "base_url": fake.base_url,
        "token": SecretStr(TOKEN),
        "team_id": TEAM_ID,
        "project_id": PROJECT_ID,
        "read_vercel_env": False,
        "kill_grace": KILL_GRACE,
    }
    settings.update(overrides)
    return VercelConfig(**settings)


@pytest.fixture
def vercel_factory(fake_vercel: Any) -> Iterator[Factory]:
    """``make(session_id)``: a :class:`VercelEnvironment` on the fake; all closed at teardown."""
    from environments.backends.vercel import VercelEnvironment

    config = vercel_config(fake_vercel)
    tracker = _Tracker(lambda sid: VercelEnvironment(sid, config=config))
    yield tracker
    tracker.close_all()
