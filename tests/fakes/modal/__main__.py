"""Run the fake Modal as its own process: ``python -m tests.fakes.modal``.

Prints one JSON line (``server_url``, ``token_id``, ``token_secret``) once both
servers listen, then serves until its stdin closes (its parent went away).
Benchmarks use this so the fake does not share the measured process's GIL.
"""

from __future__ import annotations

import json
import sys

from .service import FakeModal


def main() -> None:
    fake = FakeModal().start()
    try:
        line = {"server_url": fake.server_url, "token_id": fake.token_id,
                "token_secret": fake.token_secret}  # fmt: skip
        print(json.dumps(line), flush=True)
        sys.stdin.read()
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
