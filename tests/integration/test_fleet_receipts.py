"""An auditor on a fleet sees every receipt of a session: each worker keeps the receipts
it writes in its own ``SBX_HOME``, so ``list`` and ``verify`` ask every home that keeps
some, not whichever worker takes the shared queue (two real workers on a real Redis)."""

from __future__ import annotations

from typing import Any

from tests.fixtures_fleet import Fleet


def test_list_and_verify_cover_every_home_of_the_session(fleet_of: Any) -> None:
    fleet: Fleet = fleet_of(2)
    c = fleet.client("audit-fleet")
    first = c.start("echo one").process_id
    c.wait(first, timeout=60)
    holder = fleet.index_of(fleet.serving_pid(c))
    fleet.kill(holder)  # the session moves: its next receipt is kept by the other home
    second = c.start("echo two").process_id
    c.wait(second, timeout=60)
    assert fleet.index_of(fleet.serving_pid(c)) != holder
    fleet.start(holder)  # back on its home, under a new queue
    assert [r.process_id for r in c.receipts()] == [first, second]
    assert c.verify_receipts() == []
