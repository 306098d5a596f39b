"""Fixtures for the modal backend: the real ``modal`` SDK against tests/fakes/modal.

Registered from tests/conftest.py. The fake (control plane and task command
router on 127.0.0.1, sandboxes under bubblewrap) runs once per test session;
the SDK finds it through its own ``MODAL_SERVER_URL``, ``MODAL_TOKEN_ID`` and
``MODAL_TOKEN_SECRET``, set for the session. ``modal_factory`` returns
``make(session_id) -> Environment`` and closes what it made at teardown.
Missing bubblewrap or SDK: a failure in CI, a skip elsewhere.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures_backends import KILL_GRACE, Factory, _Tracker, unavailable


@pytest.fixture(scope="session")
def fake_modal() -> Iterator[Any]:
    """The fake Modal for the whole test session, with the SDK's variables pointing at it."""
    if importlib.util.find_spec("modal") is None:
        unavailable("the modal SDK is not installed (pip install 'sbx[modal]')")
    for tool in ("bwrap", "nsenter"):
        if not shutil.which(tool):
            unavailable(f"{tool} not installed (apt-get install bubblewrap util-linux)")
    from environments.backends.modal import sdk
    from tests.fakes.modal import TOKEN_ID, TOKEN_SECRET, FakeModal

    fake = FakeModal().start()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MODAL_SERVER_URL", fake.server_url)
        patch.setenv("MODAL_TOKEN_ID", TOKEN_ID)
        patch.setenv("MODAL_TOKEN_SECRET", TOKEN_SECRET)
        patch.delenv("MODAL_PROFILE", raising=False)
        sdk.forget_clients()
        try:
            yield fake
        finally:
            sdk.forget_clients()
            fake.stop()


def modal_config(**overrides: Any) -> Any:
    """A :class:`ModalConfig` for tests: short kill grace, a per-run app name."""
    from environments.backends.modal.config import ModalConfig

    settings: dict[str, Any] = {"kill_grace": KILL_GRACE, "app_name": "sbx-tests"}
    settings.update(overrides)
    return ModalConfig(**settings)


@pytest.fixture
def modal_factory(fake_modal: Any) -> Iterator[Factory]:
    from environments.backends.modal.environment import ModalEnvironment

    config = modal_config()
    tracker = _Tracker(lambda sid: ModalEnvironment(sid, config=config))
    yield tracker
    tracker.close_all()
