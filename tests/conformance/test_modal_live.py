"""The whole conformance suite against real Modal: only with ``SBX_LIVE_MODAL=1`` and credentials.

Never in CI. Run it by hand (it creates and terminates a few small sandboxes, billed to
the workspace of the credentials)::

    SBX_LIVE_MODAL=1 MODAL_TOKEN_ID=ak-... MODAL_TOKEN_SECRET=as-... \\
        .venv/bin/python -m pytest tests/conformance/test_modal_live.py -v

Other ``SBX_MODAL_*`` settings apply (say ``SBX_MODAL_APP_NAME``, ``SBX_MODAL_IMAGE``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from environments import conformance
from tests.fixtures_backends import KILL_GRACE, Factory, _Tracker

pytestmark = pytest.mark.skipif(
    os.environ.get("SBX_LIVE_MODAL") != "1" or bool(os.environ.get("CI")),
    reason="live Modal test: set SBX_LIVE_MODAL=1 with credentials (never in CI)",
)


@pytest.fixture
def live_modal_factory() -> Iterator[Factory]:
    from environments.backends.modal.config import ModalConfig
    from environments.backends.modal.environment import ModalEnvironment, availability

    config = ModalConfig(
        kill_grace=KILL_GRACE, app_name=os.environ.get("SBX_MODAL_APP_NAME", "sbx-live-tests")
    )
    ok, reason = availability(config)
    if not ok:
        pytest.skip(f"Modal not usable here: {reason}")
    tracker = _Tracker(lambda sid: ModalEnvironment(sid, config=config))
    yield tracker
    tracker.close_all()


@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_live_modal_conformance(live_modal_factory: Factory, check: str) -> None:
    conformance.CHECKS[check](live_modal_factory)


def test_live_modal_reattach(live_modal_factory: Factory) -> None:
    first = live_modal_factory("live-reattach")
    first.exec("echo kept > /tmp/file")
    second = live_modal_factory("live-reattach")
    assert second.exec("cat /tmp/file").output == "kept\n"
    assert second.sandbox_id == first.sandbox_id
