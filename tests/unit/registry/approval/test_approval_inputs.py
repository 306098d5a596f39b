"""What the guard accepts besides the command, what routine findings mean for deny rules,
how large the case lists are, and the package's place in the import graph."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from registry.approval import ApprovalConfigSource, ApprovalGuard, MemoryApprovalStore

from . import (
    test_detect_datastores,
    test_detect_dynamic,
    test_detect_files,
    test_detect_hardline,
    test_detect_infra,
    test_detect_interpreters,
    test_detect_obfuscation,
    test_detect_secrets,
    test_detect_system,
    test_detect_vcs,
    test_everyday,
)

PACKAGE = Path(__file__).resolve().parents[4] / "registry" / "approval"


def make_guard(tmp_path: Path, doc: dict[str, object] | None = None, **kw: object) -> ApprovalGuard:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc or {}))
    return ApprovalGuard(store=MemoryApprovalStore(), config=ApprovalConfigSource(path), **kw)  # type: ignore[arg-type]


def test_env_resolves_exported_program_names(tmp_path: Path) -> None:
    guard = make_guard(tmp_path)
    assert guard.check("$X -rf /", session_id="s", backend="local").outcome == "blocked"
    unknown = guard.check("$X -rf src", session_id="s", backend="local")
    assert unknown.outcome == "approval_required"
    assert guard.check("$X src", session_id="s", backend="local", env={"X": "ls"}).allowed
    exported = guard.check("$X -rf src", session_id="s2", backend="local", env={"X": "rm"})
    assert exported.pattern_key == "recursive_delete"


def test_protected_paths_from_the_worker_and_from_config(tmp_path: Path) -> None:
    home = tmp_path / "sbx-home"
    guard = make_guard(
        tmp_path,
        {"approvals": {"protected_paths": ["/srv/keys"]}},
        protected_paths=[str(home), str(home / "config.yaml")],
    )
    for command in (f"echo x > {home}/config.yaml", f"rm -rf {home}", "cp k /srv/keys/id"):
        decision = guard.check(command, session_id="s", backend="local")
        assert decision.outcome == "approval_required", command
        assert decision.pattern_key == "protected_path_write", command
    assert guard.check(f"cat {home}/config.yaml", session_id="s", backend="local").allowed


def test_deny_by_key_also_blocks_the_routine_forms(tmp_path: Path) -> None:
    guard = make_guard(tmp_path, {"command_denylist": ["recursive_delete", "package_uninstall"]})
    for command in ("rm -rf node_modules", "pip uninstall -y requests"):
        decision = guard.check(command, session_id="s", backend="local")
        assert decision.outcome == "blocked", command
    plain = make_guard(tmp_path)
    assert plain.check("rm -rf node_modules", session_id="s", backend="local").allowed


FAMILIES = [
    test_detect_files,
    test_detect_vcs,
    test_detect_infra,
    test_detect_datastores,
    test_detect_interpreters,
    test_detect_dynamic,
    test_detect_secrets,
    test_detect_system,
    test_detect_hardline,
    test_detect_obfuscation,
]


def test_case_counts() -> None:
    def count(module: object) -> int:
        return sum(len(v) for v in vars(module).values() if isinstance(v, list) and v
                   and isinstance(v[0], (tuple, str)))  # fmt: skip

    assert sum(count(m) for m in FAMILIES) >= 600
    assert len(set(test_everyday.EVERYDAY)) >= 150


FORBIDDEN = ("worker", "process_registry", "environments")


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: p.name)
def test_approval_is_a_leaf(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            assert top not in FORBIDDEN, (path.name, name)
            if top == "registry":
                assert name.startswith("registry.approval"), (path.name, name)
