"""The fleet setting shared by the docker and daytona configs: labels, and the names
it gives sandboxes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from environments.backends.daytona.config import DaytonaConfig
from environments.backends.docker.config import DockerConfig

Fleeted = DockerConfig | DaytonaConfig
CONFIGS: list[type[Fleeted]] = [DockerConfig, DaytonaConfig]


@pytest.mark.parametrize(
    ("model", "fingerprint"),
    [(DockerConfig, "fa732d699224"), (DaytonaConfig, "c1f0fd6ebeb8")],
)
def test_the_default_fleet_keeps_the_names_sandboxes_had_before_fleets(
    model: type[Fleeted], fingerprint: str
) -> None:
    # A running deployment re-attaches to its sandboxes by name after an upgrade: these
    # values are the names' hashes from before the fleet setting existed.
    assert model().fingerprint() == fingerprint
    assert model(fleet="default").fingerprint() == fingerprint


@pytest.mark.parametrize("model", CONFIGS)
def test_another_fleet_gets_other_sandboxes_and_its_own_label(model: type[Fleeted]) -> None:
    ours, theirs = model(fleet="blue"), model(fleet="green")
    fingerprints = {c.fingerprint() for c in (model(), ours, theirs)}
    assert len(fingerprints) == 3
    assert ours.fleet_labels() == {"sbx.fleet": "blue"}
    assert model().fleet_labels() == {"sbx.fleet": "default"}


def test_settings_that_do_not_shape_a_sandbox_leave_its_name() -> None:
    assert DockerConfig(kill_grace=9.0, fleet="blue").fingerprint() == (
        DockerConfig(fleet="blue").fingerprint()
    )
    assert DaytonaConfig(request_timeout=5.0).fingerprint() == DaytonaConfig().fingerprint()
    assert DockerConfig(memory="1g").fingerprint() != DockerConfig().fingerprint()
    assert DaytonaConfig(cpu=2).fingerprint() != DaytonaConfig().fingerprint()


@pytest.mark.parametrize("model", CONFIGS)
@pytest.mark.parametrize("fleet", ["", "a b", "x" * 64, "a/b", "ünï"])
def test_a_fleet_name_that_cannot_be_a_label_value_is_refused(
    model: type[Fleeted], fleet: str
) -> None:
    with pytest.raises(ValidationError, match="fleet"):
        model(fleet=fleet)
