"""Serve a fake Daytona until stdin closes: ``python -m tests.fakes.daytona``.

Prints one JSON line ``{"api_url": ..., "token": ...}`` once it listens. Used
where the fake must not share a process (and its GIL) with the client, as in
the benchmark.
"""

from __future__ import annotations

import json
import sys

from .server import FakeDaytona


def main() -> None:
    fake = FakeDaytona().start()
    try:
        print(json.dumps({"api_url": fake.api_url, "token": fake.token}), flush=True)
        sys.stdin.read()
    finally:
        fake.close()


if __name__ == "__main__":
    main()
