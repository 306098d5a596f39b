"""Fixtures for the daytona backend: the real SDK against a fake Daytona on 127.0.0.1.

Registered from tests/conftest.py. The fake (``tests/fakes/daytona``) runs each
sandbox's commands for real under bubblewrap; it needs the ``daytona`` SDK
(``sbx[daytona]``), ``bwrap`` and ``nsenter``, and root. Missing pieces are a
failure in CI and a skip elsewhere.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.fixtures_backends import KILL_GRACE, Factory, _Tracker, unavailable

if TYPE_CHECKING:
    from environments.backends.daytona.config import DaytonaConfig
    from tests.fakes.daytona import FakeDaytona


@pytest.fixture(scope="session")
def daytona_fake() -> Iterator[FakeDaytona]:
    """One fake Daytona for the test session (tests tell their sandboxes apart by session id)."""
    if importlib.util.find_spec("daytona") is None:
        unavailable("the daytona SDK is not installed (pip install 'sbx[daytona]')")
    for tool in ("bwrap", "nsenter", "setsid"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed (apt-get install bubblewrap util-linux)")
    if os.geteuid() != 0:
        unavailable("the fake Daytona jails sandboxes with bwrap + nsenter, which need root")
    from tests.fakes.daytona import FakeDaytona

    fake = FakeDaytona().start()
    try:
        yield fake
    finally:
        fake.close()


def daytona_config(fake: FakeDaytona, **overrides: Any) -> DaytonaConfig:
    """Settings that point the backend at ``fake``, with a short kill grace."""
    from environments.backends.daytona.config import DaytonaConfig

    settings: dict[str, Any] = {
        "api_key": fake.token,
        "api_url": fake.api_url,
        "target": "us",
        "kill_grace": KILL_GRACE,
    }
    settings.update(overrides)
    return DaytonaConfig(**settings)


@pytest.fixture
def daytona_factory(daytona_fake: FakeDaytona) -> Iterator[Factory]:
    from environments.backends.daytona.environment import DaytonaEnvironment

    config = daytona_config(daytona_fake)
    tracker = _Tracker(lambda sid: DaytonaEnvironment(sid, config=config))
    yield tracker
    tracker.close_all()
