"""The daytona backend against the real Daytona service: never in CI, only when asked.

    SBX_LIVE_DAYTONA=1 DAYTONA_API_KEY=... .venv/bin/python -m pytest \\
        tests/conformance/test_daytona_live.py

``DAYTONA_API_URL`` / ``DAYTONA_TARGET`` (or ``SBX_DAYTONA_API_KEY``,
``SBX_DAYTONA_API_URL``, ``SBX_DAYTONA_TARGET``) choose the account and region.
Sandboxes are ephemeral, labelled with this test run's worker and deleted at
the end (also when a test fails). Expect a few minutes and the cost of ~20
short-lived sandboxes.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from environments import conformance
from tests.fixtures_backends import KILL_GRACE, Factory, _Tracker

LIVE = os.environ.get("SBX_LIVE_DAYTONA") == "1" and not os.environ.get("CI")
KEY = os.environ.get("SBX_DAYTONA_API_KEY") or os.environ.get("DAYTONA_API_KEY")

pytestmark = pytest.mark.skipif(
    not (LIVE and KEY),
    reason="live Daytona run: set SBX_LIVE_DAYTONA=1 and DAYTONA_API_KEY (never in CI)",
)


@pytest.fixture(scope="module")
def live_config() -> Iterator[Any]:
    pytest.importorskip("daytona")
    from environments.backends.daytona.config import DaytonaConfig
    from environments.backends.daytona.environment import reap_orphans
    from environments.backends.naming import worker_label

    config = DaytonaConfig(
        api_key=os.environ.get("SBX_DAYTONA_API_KEY") or None,
        api_url=os.environ.get("SBX_DAYTONA_API_URL") or None,
        target=os.environ.get("SBX_DAYTONA_TARGET") or None,
        kill_grace=KILL_GRACE,
        ephemeral=True,
        auto_stop_interval=15,
    )
    yield config
    # Whatever this run left behind goes, whatever its state.
    reap_orphans(config, -1, labels={"sbx.worker": worker_label()})


@pytest.fixture
def live_factory(live_config: Any) -> Iterator[Factory]:
    from environments.backends.daytona.environment import DaytonaEnvironment

    tracker = _Tracker(lambda sid: DaytonaEnvironment(sid, config=live_config))
    yield tracker
    tracker.close_all()


@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_live_conformance(live_factory: Factory, check: str) -> None:
    conformance.CHECKS[check](live_factory)


def test_live_reattach_and_restart(live_config: Any) -> None:
    from environments.backends.daytona.environment import DaytonaEnvironment
    from environments.backends.daytona.sdk import client_for

    session = f"live-{secrets.token_hex(4)}"
    first = DaytonaEnvironment(session, config=live_config.model_copy(update={"ephemeral": False}))
    try:
        first.exec("echo kept > ~/file; cd /tmp")
        second = DaytonaEnvironment(session, config=first.config)
        assert second.exec("cat ~/file").output == "kept\n"
        assert second.sandbox_id == first.sandbox_id
        second.shell.close()
        client_for(first.config).stop(second.sandbox)
        third = DaytonaEnvironment(session, config=first.config)
        result = third.exec("cat ~/file")
        assert "was stopped; it was started again" in result.output
        assert result.output.endswith("kept\n")
    finally:
        first.close()
