"""The persisted MCP snapshot (registry/mcp_cache.py), the catalog's use of it, and config.

Uses test-double listers (no server process); the real-server paths are covered by
test_mcp_session.py and tests/integration/test_mcp_worker.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from registry.async_bridge import run_async
from registry.core import ToolRegistry
from registry.mcp import (
    McpCatalog,
    McpServerConfig,
    McpServerUnavailable,
    McpToolSpec,
    sync_mcp_tools_to_registry,
    wire_name,
)
from registry.mcp_cache import McpCacheStore, config_fingerprint
from worker.service.mcp import open_offline_catalog, server_configs, start_mcp
from worker.settings import Settings

SERVER = McpServerConfig("s1", "Server One", "/usr/bin/srv", ("--x",), env={"API_KEY": "k"})
TOOLS = [McpToolSpec("add", "Add numbers.", {"type": "object"}), McpToolSpec("sub", "")]
GH_TOKEN = "ghp_" + "a1B2" * 9  # recognised by the redactor


@pytest.fixture
def store(tmp_path: Path) -> McpCacheStore:
    return McpCacheStore(tmp_path / "home" / "mcp-cache.json")


def never_called(_: McpServerConfig) -> object:
    raise AssertionError("the catalog connected")


async def listing(_: McpServerConfig) -> list[McpToolSpec]:
    return list(TOOLS)


async def failing(_: McpServerConfig) -> list[McpToolSpec]:
    raise McpServerUnavailable(f"boom token={GH_TOKEN}")


def test_success_round_trip_private_file_no_env_values(store: McpCacheStore) -> None:
    store.record_success(SERVER, TOOLS)
    entry = store.entry_for(SERVER)
    assert entry is not None and entry.tools == TOOLS and entry.error is None
    assert entry.refreshed_at is not None
    assert store.path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in store.path.parent.iterdir() if p.name.startswith(".tmp")] == []
    text = store.path.read_text()
    assert "API_KEY" not in text and '"k"' not in text  # neither names nor values of env


def test_schema_strings_are_redacted_on_disk(store: McpCacheStore) -> None:
    schema = {"type": "object", "properties": {"token": {"type": "string", "default": GH_TOKEN,
              "examples": [f"Bearer {GH_TOKEN}"]}}}  # fmt: skip
    store.record_success(SERVER, [McpToolSpec("call", "Call.", schema)])
    assert GH_TOKEN not in store.path.read_text()
    entry = store.entry_for(SERVER)
    assert entry is not None and entry.tools is not None
    assert entry.tools[0].input_schema["properties"]["token"]["type"] == "string"


def test_fingerprint_ignores_env_values_but_not_command(store: McpCacheStore) -> None:
    store.record_success(SERVER, TOOLS)
    other_secret = dataclasses.replace(SERVER, env={"API_KEY": "rotated"})
    assert config_fingerprint(other_secret) == config_fingerprint(SERVER)
    assert store.entry_for(other_secret) is not None
    assert store.entry_for(dataclasses.replace(SERVER, args=("--y",))) is None
    assert store.entry_for(dataclasses.replace(SERVER, id="other")) is None


def test_failure_keeps_last_good_and_is_redacted(store: McpCacheStore) -> None:
    store.record_failure(SERVER, "first failure")
    entry = store.entry_for(SERVER)
    assert entry is not None and entry.tools is None and entry.error == "first failure"
    store.record_success(SERVER, TOOLS)
    store.record_failure(SERVER, f"refused: token={GH_TOKEN}")
    entry = store.entry_for(SERVER)
    assert entry is not None and entry.tools == TOOLS and entry.refreshed_at is not None
    assert entry.error is not None and "refused" in entry.error
    assert GH_TOKEN not in store.path.read_text()
    # a failure under another configuration does not keep the old tools
    store.record_failure(dataclasses.replace(SERVER, command="/other"), "x")
    assert store.entry_for(SERVER) is None


BAD_FILES = [b"{not json", b"[]", b'{"version": 99}', b'{"version": 1, "servers": {"s1": 3}}']


@pytest.mark.parametrize("content", BAD_FILES)
def test_unreadable_file_reads_empty_and_is_rewritten(store: McpCacheStore, content: bytes) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(content)
    assert store.load() == {}
    store.record_success(SERVER, TOOLS)
    assert json.loads(store.path.read_text())["version"] == 1


def test_symlink_is_neither_read_nor_written_through(store: McpCacheStore, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"version": 1, "servers": {}}')
    store.path.parent.mkdir(parents=True)
    store.path.symlink_to(target)
    assert store.load() == {}
    store.record_success(SERVER, TOOLS)
    assert target.read_text() == '{"version": 1, "servers": {}}'
    assert not store.path.is_symlink() and store.entry_for(SERVER) is not None


def test_concurrent_writers_lose_no_entry(store: McpCacheStore) -> None:
    servers = [dataclasses.replace(SERVER, id=f"s{i}") for i in range(8)]

    def write(server: McpServerConfig) -> None:
        own = McpCacheStore(store.path)  # separate instances: only the file lock serializes
        for n in range(10):
            own.record_success(server, TOOLS[: n % 2 + 1])

    threads = [threading.Thread(target=write, args=(s,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(store.load()) == {s.id for s in servers}


def test_catalog_seeds_from_store_and_persists_outcomes(store: McpCacheStore) -> None:
    store.record_success(SERVER, TOOLS)
    cat = McpCatalog([SERVER], lister=never_called, store=store)  # type: ignore[arg-type]
    assert cat.list_tools("s1") == TOOLS  # warm from the file: no cold refresh
    cat.close()

    cat = McpCatalog([SERVER], lister=failing, store=store)
    assert cat.refresh_tools("s1") == TOOLS  # last good kept
    assert cat.status("s1")["last_error"].startswith("McpServerUnavailable: boom")
    cat.close()
    entry = store.entry_for(SERVER)
    assert entry is not None and entry.tools == TOOLS and entry.error is not None

    cat = McpCatalog([SERVER], lister=never_called, store=store)  # type: ignore[arg-type]
    assert cat.status("s1") == {"id": "s1", "name": "Server One", "enabled": True,
                                "cached_tools": 2, "refreshed_at": entry.refreshed_at,
                                "last_error": entry.error}  # fmt: skip
    cat.close()


def test_snapshot_is_written_after_listeners_ran(store: McpCacheStore) -> None:
    seen: list[object] = []
    cat = McpCatalog([SERVER], lister=listing, store=store)
    cat.subscribe(lambda sid: seen.append(store.entry_for(SERVER)))
    cat.refresh_tools("s1")
    assert seen == [None]  # the registry is synced before other processes can see the tools
    assert store.entry_for(SERVER) is not None
    cat.close()


def test_offline_catalog_never_connects_refreshes_or_writes(store: McpCacheStore) -> None:
    cold = dataclasses.replace(SERVER, id="cold")
    store.record_success(SERVER, TOOLS)
    before = store.path.read_bytes()
    cat = McpCatalog([SERVER, cold], lister=never_called, store=store,  # type: ignore[arg-type]
                     offline=True)  # fmt: skip
    assert cat.list_tools("cold") is None and cat.list_tools("s1") == TOOLS
    assert cat.refresh_tools("cold") is None and cat.prewarm() == []
    assert cat.on_tool_list_changed("s1") is None
    reg = ToolRegistry()
    expected = [wire_name("s1", "Server One", "add"), wire_name("s1", "Server One", "sub")]
    assert sync_mcp_tools_to_registry(reg, cat) == expected
    with pytest.raises(McpServerUnavailable, match="offline"):
        run_async(cat.call_tool("s1", "add", {}))
    cat.close()
    assert store.path.read_bytes() == before
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-")]


# --- configuration (worker/settings.py, worker/mcp_wiring.py) ---------------------------


def settings_from_yaml(home: Path, doc: object) -> Settings:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(doc))
    return Settings(home=home)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k in [k for k in os.environ if k.startswith("SBX_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("SBX_HOME", str(tmp_path / "h"))  # the YAML source reads $SBX_HOME
    return tmp_path / "h"


def test_config_yaml_entry_becomes_a_server_config(home: Path) -> None:
    settings = settings_from_yaml(home, {"mcp_servers": {"gh": {
        "command": "npx", "args": ["-y", "server-github"], "timeout": 12,
        "env": {"GITHUB_TOKEN": GH_TOKEN, "PORT": 8080, "DEBUG": True},
        "force_prompt_tools": ["delete_repo"], "enabled": False}}})  # fmt: skip
    assert GH_TOKEN not in repr(settings) and GH_TOKEN not in str(settings.model_dump())
    [cfg] = server_configs(settings)
    assert cfg == McpServerConfig(
        "gh", "gh", "npx", ("-y", "server-github"),
        env={"GITHUB_TOKEN": GH_TOKEN, "PORT": "8080", "DEBUG": "true"}, enabled=False,
        force_prompt_tools=frozenset({"delete_repo"}), timeout=12.0,
    )  # fmt: skip
    assert GH_TOKEN not in repr(cfg)


@pytest.mark.parametrize(
    ("servers", "where", "message"),
    [
        ({"a": {"env": {"K": "SECRET-1"}}}, ("mcp_servers", "a", "command"), "Field required"),
        (
            {"a": {"command": "x", "env": {"K": ["SECRET-1"]}}},
            ("mcp_servers", "a", "env", "K"),
            "valid string",
        ),
        ({"a": {"command": "x", "env": "K=SECRET-1"}}, ("mcp_servers", "a", "env"), "dictionary"),
        (
            {"a": {"command": "x", "env": {"1BAD": "SECRET-1"}}},
            ("mcp_servers", "a", "env", "1BAD", "[key]"),
            "pattern",
        ),
        ({"a/b": {"command": "x"}}, ("mcp_servers", "a/b", "[key]"), "pattern"),
        ({"a": {"command": "x", "timeout": -1}}, ("mcp_servers", "a", "timeout"), "greater"),
        ({"a": {"command": "x", "bogus": 1}}, ("mcp_servers", "a", "bogus"), "Extra inputs"),
        ({"a": "npx server"}, ("mcp_servers", "a"), "valid dictionary"),
        ([{"command": "x", "env": {"K": "SECRET-1"}}], ("mcp_servers",), "valid dictionary"),
    ],
)
def test_bad_entries_name_the_key_and_never_echo_env_values(
    home: Path, servers: object, where: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ValidationError) as info:
        settings_from_yaml(home, {"mcp_servers": servers})
    [error] = info.value.errors()
    assert tuple(str(p) for p in error["loc"]) == where and message in error["msg"]
    assert "SECRET-1" not in str(info.value)


def test_start_mcp_registers_persisted_tools_and_close_is_idempotent(home: Path) -> None:
    settings = settings_from_yaml(home, {"mcp_servers": {"s1": {
        "name": "Server One", "command": "/nonexistent/mcp-server", "args": ["--x"],
        "env": {"API_KEY": "k"}}}})  # fmt: skip
    [cfg] = server_configs(settings)
    McpCacheStore(home / "mcp-cache.json").record_success(cfg, TOOLS)
    reg = ToolRegistry()
    wiring = start_mcp(settings, reg)
    assert wiring is not None
    assert reg.get(wire_name("s1", "Server One", "add")) is not None  # before any refresh
    wiring.catalog.wait_idle()  # the background refresh fails: the last good tools stay
    assert reg.get(wire_name("s1", "Server One", "add")) is not None
    assert "could not be started" in (open_offline_catalog(settings).last_error("s1") or "")
    wiring.close()
    wiring.close()
    assert start_mcp(settings_from_yaml(home, {"mcp_servers": {}}), reg) is None
    assert start_mcp(settings_from_yaml(home, {"mcp_servers": None}), reg) is None


def test_settings_built_in_code_take_validated_entries(home: Path) -> None:
    from worker.settings import McpServerSettings

    settings = Settings(home=home, mcp_servers={"a": McpServerSettings(command="x")})
    assert [c.command for c in server_configs(settings)] == ["x"]
