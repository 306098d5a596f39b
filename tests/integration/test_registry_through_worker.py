"""The registry's features through a real worker and the CLI: a tool plugin installed as
another distribution (entry point group ``sbx.tools``, ``tests/fakes/plugin_tools.py``)
with the operator's settings, ``applies(scope)``, deferred exposition and its meta-tools
per session, plugin hooks and the configured repair."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import REPO, installed_distribution
from worker.client import SandboxClient

SMALL_WINDOW = 8000
"""A context window in which the plugin's eight knowledge-base tools are deferred."""
PLUGINS = json.dumps({"repair": "demo"})


@pytest.fixture
def plugin_path(tmp_path: Path) -> Path:
    """A directory holding an installed distribution with two ``sbx.tools`` plugins."""
    return installed_distribution(
        tmp_path / "plugins",
        "sbx-demo-tools",
        "[sbx.tools]\n"
        "demo = tests.fakes.plugin_tools:register\n"
        "override = tests.fakes.plugin_tools:override\n",
    )


def _env(home: Path, plugins: Path, **extra: str) -> dict[str, str]:
    env = worker_env(home, None, **extra)
    env["PYTHONPATH"] = f"{REPO}:{plugins}"
    return env


def sbx(home: Path, plugins: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.cli.main", *args], env=_env(home, plugins, **env),
        cwd=str(REPO), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def names(definitions: list[dict[str, Any]]) -> list[str]:
    return sorted(d["function"]["name"] for d in definitions)


@pytest.fixture
def hook_log(tmp_path: Path) -> Path:
    return tmp_path / "hooks.log"


@pytest.fixture
def worker(sbx_home: Path, plugin_path: Path, hook_log: Path) -> Iterator[None]:
    from process_registry.sessions import load_or_create_secret
    from tests.helpers import WorkerProcess, wait_until

    load_or_create_secret(sbx_home / "secret.key")
    proc = WorkerProcess(
        _env(sbx_home, plugin_path, SBX_PLUGINS=PLUGINS, PLUGIN_HOOK_LOG=str(hook_log)),
        sbx_home / "w.log",
    )
    proc.start()
    try:
        with SandboxClient(session_id="ready", settings=settings_for(sbx_home, None)) as c:
            wait_until(lambda: c.ping(timeout=1.0), 60, "worker to answer")
        yield
    finally:
        proc.stop()


def client_of(home: Path, session: str) -> SandboxClient:
    return SandboxClient(session_id=session, settings=settings_for(home, None))


def call(client: SandboxClient, tool: str, args: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call(tool, args))
    return result


# -- the CLI ------------------------------------------------------------------------


def test_sbx_tools_loads_plugins_applies_scope_and_defers(
    sbx_home: Path, plugin_path: Path
) -> None:
    plain = sbx(sbx_home, plugin_path, "tools", "--json")
    assert plain.returncode == 0, plain.stderr
    listed = names(json.loads(plain.stdout))
    assert {"add_one", "kb_lookup_0", "terminal", "read_file", "write_file"} <= set(listed)
    assert "weather" not in listed  # applies({}) is false
    scoped = sbx(sbx_home, plugin_path, "tools", "--json", "--scope", '{"weather": true}')
    assert "weather" in names(json.loads(scoped.stdout))
    small = sbx(sbx_home, plugin_path, "tools", "--json", "--context-window", str(SMALL_WINDOW))
    shown = json.loads(small.stdout)
    assert shown["deferred"] == [f"kb_lookup_{n}" for n in range(8)]
    assert {"tool_search", "tool_inspect", "tool_invoke"} <= set(names(shown["tools"]))
    assert not any(n.startswith("kb_lookup") for n in names(shown["tools"]))
    assert "kb: 8 tools" in shown["system_prompt"]
    bad = sbx(sbx_home, plugin_path, "tools", "--scope", "[1]")
    assert bad.returncode == 2 and "--scope" in bad.stderr


def test_overriding_a_builtin_needs_the_operators_opt_in(sbx_home: Path, plugin_path: Path) -> None:
    def write_file_description(**env: str) -> str:
        p = sbx(sbx_home, plugin_path, "tools", "--json", **env)
        tools = {d["function"]["name"]: d["function"] for d in json.loads(p.stdout)}
        return str(tools["write_file"]["description"])

    assert write_file_description() != "A plugin's write_file."
    opt_in = json.dumps({"entries": {"override": {"allow_tool_override": True}}})
    assert write_file_description(SBX_PLUGINS=opt_in) == "A plugin's write_file."
    disabled = json.dumps({"entries": {"demo": {"enabled": False}}})
    p = sbx(sbx_home, plugin_path, "tools", "--json", SBX_PLUGINS=disabled)
    assert "add_one" not in names(json.loads(p.stdout))


# -- through a worker ---------------------------------------------------------------


def test_definitions_and_meta_tools_per_session(sbx_home: Path, worker: None) -> None:
    with client_of(sbx_home, "alice") as alice, client_of(sbx_home, "bob") as bob:
        offered = alice.tool_definitions(context_window=SMALL_WINDOW, scope={"weather": True})
        assert offered.deferred == [f"kb_lookup_{n}" for n in range(8)]
        assert {"weather", "add_one", "tool_search", "tool_invoke"} <= set(names(offered.tools))
        assert "<DEFERRED_TOOLS>" in offered.system_prompt
        big = bob.tool_definitions(context_window=1_000_000)
        assert big.deferred == [] and "kb_lookup_3" in names(big.tools)
        assert "weather" not in names(big.tools)

        found = call(alice, "tool_search", {"query": "knowledge base number 3"})
        assert [t["name"] for g in found["namespaces"] for t in g["tools"]] == ["kb_lookup_3"]
        first = call(alice, "tool_invoke", {"name": "kb_lookup_3", "params": {"query": "q"}})
        assert "Inspect kb_lookup_3" in first["error"] and "signature" in first
        ran = call(alice, "tool_invoke", {"name": "kb_lookup_3", "params": {"query": "q"}})
        assert ran == {"kb": 3, "query": "q", "session": "alice"}
        invalid = call(alice, "tool_invoke", {"name": "kb_lookup_3", "params": {"query": 1}})
        assert "Invalid params" in invalid["error"]

        # Bob's request deferred nothing; his inspected set is his own.
        assert "not deferred" in call(bob, "tool_invoke", {"name": "kb_lookup_3"})["error"]
        bob.tool_definitions(context_window=SMALL_WINDOW)
        theirs = call(bob, "tool_invoke", {"name": "kb_lookup_3", "params": {"query": "q"}})
        assert "Inspect kb_lookup_3" in theirs["error"]
        assert "kb_lookup_5" in call(bob, "tool_inspect", {"name": "kb_lookup_5"})["signature"]

        # A new request starts afresh: Alice inspects again.
        alice.tool_definitions(context_window=SMALL_WINDOW)
        again = call(alice, "tool_invoke", {"name": "kb_lookup_3", "params": {"query": "q"}})
        assert "Inspect kb_lookup_3" in again["error"]
    with client_of(sbx_home, "carol") as carol:
        never = call(carol, "tool_search", {})
        assert never["status"] == "not_found" and "tool definitions" in never["error"]


def test_plugin_hooks_and_repair_run_in_the_worker(
    sbx_home: Path, worker: None, hook_log: Path
) -> None:
    with client_of(sbx_home, "hooks") as c:
        blocked = call(c, "terminal", {"command": "echo forbidden-by-plugin"})
        assert blocked["blocked"] is True and "the plugin forbids this" in blocked["error"]
        assert call(c, "terminal", {"command": "echo fine"})["output"] == "fine\n"
        assert call(c, "add_one", {"n": "41"}) == {"result": 42}  # repaired by the plugin
        assert "Invalid arguments" in call(c, "add_one", {"n": "many"})["error"]
        c.tool_definitions(context_window=SMALL_WINDOW)
        call(c, "tool_inspect", {"name": "kb_lookup_1"})
        call(c, "tool_invoke", {"name": "kb_lookup_1", "params": {"query": "x"}})
    # Post hooks saw every call that ran, deferred ones included; the blocked one never ran.
    assert hook_log.read_text().split() == ["terminal", "add_one", "add_one", "kb_lookup_1"]


def test_a_session_named_like_anothers_inspected_set_touches_neither(
    sbx_home: Path, worker: None
) -> None:
    """Session ids may hold ``:``: the records of ``v:inspected`` and ``v``'s inspected set
    must be different keys (they were one: the first's tools request replaced the second's
    set with a string, and ``v``'s next meta-tool call failed on a WRONGTYPE)."""
    with client_of(sbx_home, "v") as victim, client_of(sbx_home, "v:inspected") as other:
        victim.tool_definitions(context_window=SMALL_WINDOW)
        assert "kb_lookup_5" in call(victim, "tool_inspect", {"name": "kb_lookup_5"})["signature"]
        other.tool_definitions(context_window=1_000_000)  # defers nothing
        ran = call(victim, "tool_invoke", {"name": "kb_lookup_5", "params": {"query": "q"}})
        assert ran == {"kb": 5, "query": "q", "session": "v"}
        # And the victim's next request leaves the other session's record alone.
        victim.tool_definitions(context_window=SMALL_WINDOW)
        nothing = call(other, "tool_invoke", {"name": "kb_lookup_5", "params": {"query": "q"}})
        assert "not deferred" in nothing["error"]
