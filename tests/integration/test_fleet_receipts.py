"""An auditor on a fleet sees every receipt of a session: each worker keeps the receipts
it writes in its own ``SBX_HOME``, so ``list`` and ``verify`` ask every home that keeps
some, not whichever worker takes the shared queue (two real workers on a real Redis)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures_fleet import Fleet
from worker.client import SandboxClient
from worker.protocol.errors import ProcessError


def receipt_then_kill_its_home(fleet: Fleet, session: str) -> tuple[SandboxClient, str, int]:
    """A session with one finished process, whose worker (index returned) was SIGKILLed."""
    c = fleet.client(session)
    first = c.start("echo one").process_id
    c.wait(first, timeout=60)
    holder = fleet.index_of(fleet.serving_pid(c))
    fleet.kill(holder)
    return c, first, holder


def test_list_and_verify_cover_every_home_of_the_session(fleet_of: Any) -> None:
    fleet: Fleet = fleet_of(2)
    # The session moves: its next receipt is kept by the other home.
    c, first, holder = receipt_then_kill_its_home(fleet, "audit-fleet")
    second = c.start("echo two").process_id
    c.wait(second, timeout=60)
    assert fleet.index_of(fleet.serving_pid(c)) != holder
    fleet.start(holder)  # back on its home, under a new queue
    assert [r.process_id for r in c.receipts()] == [first, second]
    assert c.verify_receipts() == []


def test_a_home_whose_worker_died_unnoticed_is_reported_not_checked(fleet_of: Any) -> None:
    # SIGKILLed, the worker still looks present until its presence expires (SBX_LOST_AFTER):
    # asked meanwhile, its home never answers. The audit names it instead of failing whole.
    fleet: Fleet = fleet_of(2)
    c, _, holder = receipt_then_kill_its_home(fleet, "audit-fleet-dead")
    assert c.verify_receipts() == [
        f"audit-fleet-dead: the receipts kept by worker {fleet.worker_id(holder)} were not "
        "checked (no running worker serves its home)"
    ]
    assert c.receipts() == []


def test_a_receipt_kept_by_a_worker_that_died_unnoticed_is_one_clear_error(
    fleet_of: Any,
) -> None:
    fleet: Fleet = fleet_of(2)
    c, first, holder = receipt_then_kill_its_home(fleet, "audit-fleet-show")
    with pytest.raises(ProcessError) as refused:
        c.receipt(first)
    assert refused.value.status == "gone"
    assert str(refused.value) == (
        f"worker {fleet.worker_id(holder)} died before it answered: "
        "no running worker serves its home"
    )
