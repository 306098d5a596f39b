"""Fixtures for registry tests: a private registry and a context that needs no sandbox."""

from __future__ import annotations

from typing import Any, cast

import pytest

from registry.context import ToolContext
from registry.core import ToolRegistry


@pytest.fixture
def reg() -> ToolRegistry:
    return ToolRegistry()


@pytest.fixture
def ctx() -> ToolContext:
    # these tools never touch the pool; a real SandboxPool is not needed
    return ToolContext(session_id="s1", call_id="c1", backend="local", pool=cast(Any, None))
