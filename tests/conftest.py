"""Registers the suite's fixture modules; fixtures themselves live in ``tests/fixtures_*.py``."""

from __future__ import annotations

import importlib.util

pytest_plugins = [
    name
    for name in (
        "tests.fixtures_workers",
        "tests.fixtures_backends",
        "tests.fixtures_amqp",
        "tests.fixtures_fleet",
        "tests.fixtures_modal",
        "tests.fixtures_vercel",
        "tests.fixtures_daytona",
    )
    if importlib.util.find_spec(name) is not None
]
