"""The worker's reaper: idle sandboxes closed, orphan sweeps asked of every backend in use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from environments.pool import SandboxPool
from worker.service.reaper import Reaper


def test_reaper_closes_idle_sandboxes_and_sweeps_orphans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    swept: list[float] = []
    def sweep(cls: object, config: object, idle: float, keep: object) -> list[str]:
        swept.append(idle)
        return []

    monkeypatch.setattr(LocalEnvironment, "reap_orphans", classmethod(sweep))
    pool = SandboxPool(
        lambda backend, sid: LocalEnvironment(sid, LocalConfig(cwd=str(tmp_path))), idle_ttl=0.0
    )
    with pool.use("s", "local") as env:
        env.exec("true")
    reaper = Reaper(ledger=Any, interval=1.0, pool=pool, orphan_max_idle=42.0)  # type: ignore[arg-type]
    reaper._reap_sandboxes(pool)
    assert len(pool) == 0
    assert swept == [42.0]
    reaper._reap_sandboxes(pool)  # the next sweep waits for orphan_sweep_interval
    assert swept == [42.0]
