"""The shape of the code: dependencies point one way, no cycles, a light client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grimp

from tests.helpers import REPO

PACKAGES = ("worker", "registry", "process_registry", "environments")


def test_import_contracts_hold() -> None:
    """The import-linter contracts of pyproject.toml (layers, client, protocol, leaves)."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" not in proc.stdout.split("Contracts:")[-1].replace("0 broken", "")


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    imported = graph.find_modules_directly_imported_by(child)
                    work.append((child, iter(sorted(imported))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_in_the_four_packages() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle() -> None:
    """The check above can fail: a planted two-module cycle is found."""
    graph = grimp.ImportGraph()
    for name in ("a", "b", "c"):
        graph.add_module(name)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="a")
    graph.add_import(importer="c", imported="a")
    assert _cycles(graph) == [["a", "b"]]


def test_importing_the_client_loads_only_the_wire_side_and_registers_no_tool() -> None:
    probe = (
        "import json, sys, worker.client\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('worker', 'registry', 'process_registry', 'environments', 'celery', 'yaml',"
        " 'pydantic_settings'))\n"
        "import registry.core\n"
        "print(json.dumps({'loaded': loaded, 'tools': registry.core.registry.names()}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    heavy = (
        "registry.approval",
        "registry.core",
        "registry.tools",
        "registry.dispatch",
        "environments.backends",
        "environments.pool",
        "process_registry.table",
        "worker.service",
        "worker.cli",
    )
    too_heavy = [m for m in report["loaded"] if any(m == h or m.startswith(h + ".") for h in heavy)]
    assert too_heavy == []
    assert "worker.protocol.messages" in report["loaded"]
    assert report["tools"] == []
    # Everything else it may load, named: a new dependency of the client is a decision.
    unexpected = [m for m in report["loaded"] if not _client_may_load(m)]
    assert unexpected == []
    # Of the rest of sbx, exactly those leaves (and the packages holding them).
    beyond = {m for m in report["loaded"] if not m.startswith(("worker.client", "worker.protocol"))}
    assert beyond == {"worker", "environments", "environments.errors", "process_registry",
                      "process_registry.tokens", "process_registry.tokens.formats",
                      "process_registry.tokens.primitives"}  # fmt: skip


CLIENT_MAY_LOAD = (
    "worker.client",  # itself
    "worker.protocol",  # the wire protocol: messages, errors, MACs, ledger, streams
    # The two leaves the protocol stands on, shared with the worker side, which the
    # layering keeps below it (a lower layer may not import ``worker``):
    "environments.errors",  # the root of every sbx error, its errors' included
    "process_registry.tokens.formats",  # what session ids and tokens look like
    "process_registry.tokens.primitives",  # the MACs messages and answers carry
)
"""What ``import worker.client`` may load. The settings and their readers (YAML,
environment), the transport (``worker.broker``, Celery) and key handling
(``worker.identity``, keyrings) load with the first client that needs them."""


def _client_may_load(module: str) -> bool:
    """An allowed module, inside one, or a package holding one."""
    return any(
        module == m or module.startswith(m + ".") or m.startswith(module + ".")
        for m in CLIENT_MAY_LOAD
    )
