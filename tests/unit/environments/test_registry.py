"""Backend lookup: built-ins by module path, aliases, and why a backend is missing."""

from __future__ import annotations

import pytest

from environments.backends.apptainer import ApptainerEnvironment
from environments.errors import UnknownBackend
from environments.registry import (
    BUILTIN_BACKENDS,
    _import_problem,
    backend_availability,
    backend_class,
    backend_names,
    canonical_name,
)


def test_singularity_is_apptainer_under_one_name() -> None:
    assert canonical_name("singularity") == "apptainer"
    assert backend_class("singularity") is backend_class("apptainer") is ApptainerEnvironment
    assert ApptainerEnvironment.backend == "apptainer"
    assert "singularity" not in backend_names()
    assert "singularity" in backend_names(with_aliases=True)


def test_unknown_backend_names_the_known_ones() -> None:
    with pytest.raises(UnknownBackend, match=r"known: .*docker.*singularity"):
        backend_class("nope")


def test_every_builtin_declares_name_config_and_capabilities() -> None:
    for name in ("local", "docker", "ssh", "apptainer"):
        cls = backend_class(name)
        assert cls.backend == name
        assert cls.config_model().type == name
        assert isinstance(cls.supports_pty, bool)
        assert isinstance(cls.processes_on_worker_host, bool)
        assert isinstance(cls.can_punch_holes, bool)
    assert backend_class("local").processes_on_worker_host
    assert not backend_class("docker").processes_on_worker_host


def test_a_missing_backend_module_is_told_from_a_missing_sdk() -> None:
    module = BUILTIN_BACKENDS["modal"].partition(":")[0]
    missing_module = ModuleNotFoundError(f"No module named '{module}'", name=module)
    assert "has no modal backend" in _import_problem("modal", missing_module)
    missing_sdk = ModuleNotFoundError("No module named 'modal'", name="modal")
    reason = _import_problem("modal", missing_sdk)
    assert "pip install 'sbx[modal]'" in reason and "has no" not in reason


def test_availability_reports_instead_of_raising() -> None:
    ok, reason = backend_availability("nope")
    assert not ok and "unknown backend" in reason
