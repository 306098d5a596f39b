"""The conformance suite of environments.conformance against every backend on real engines."""

from __future__ import annotations

import pytest

from environments import conformance
from tests.fixtures_backends import Factory


@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_conformance(any_backend: Factory, check: str) -> None:
    conformance.CHECKS[check](any_backend)
