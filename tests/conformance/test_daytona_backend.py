"""The daytona backend on the real SDK against the fake Daytona: the whole conformance suite."""

from __future__ import annotations

import pytest

from environments import conformance
from tests.fixtures_backends import Factory


@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_conformance(daytona_factory: Factory, check: str) -> None:
    conformance.CHECKS[check](daytona_factory)
