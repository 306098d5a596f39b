"""AST discovery of built-in tool modules and entry-point plugins."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from registry import discovery
from registry.core import ToolRegistry
from registry.discovery import discover_builtin_tools, discover_plugin_tools, module_registers_tools
from tests.unit.registry.helpers import schema


def write(folder: Path, name: str, text: str) -> Path:
    p = folder / name
    p.write_text(text)
    return p


def test_top_level_registry_register_matches(tmp_path: Path) -> None:
    assert module_registers_tools(write(tmp_path, "a.py", "registry.register('x')\n"))


def test_top_level_bare_register_matches(tmp_path: Path) -> None:
    assert module_registers_tools(write(tmp_path, "a.py", "def register(): pass\nregister()\n"))


def test_register_inside_function_does_not_match(tmp_path: Path) -> None:
    src = "def setup():\n    registry.register('x')\nclass C:\n    register()\n"
    assert not module_registers_tools(write(tmp_path, "a.py", src))


def test_register_in_top_level_try_matches(tmp_path: Path) -> None:
    src = "try:\n    import x\nexcept ImportError:\n    pass\nelse:\n    registry.register(1)\n"
    assert module_registers_tools(write(tmp_path, "a.py", src))


def test_terminal_module_is_found() -> None:
    tools = Path(discovery.__file__).parent / "tools" / "terminal.py"
    assert module_registers_tools(tools)
    assert "registry.tools.terminal" in discover_builtin_tools()


def test_discovery_imports_registering_modules_skips_failures(
    tmp_path: Path, caplog: Any
) -> None:
    write(tmp_path, "good.py", "LOADED = True\nregister = print\nregister('good loaded')\n")
    write(tmp_path, "helper.py", "LOADED = True\n")
    write(tmp_path, "broken.py", "import not_a_module_xyz\nregistry.register('x')\n")
    try:
        assert discover_builtin_tools(tmp_path) == ["sbx_tools_good"]
        assert "sbx_tools_helper" not in sys.modules
        assert "broken.py" in caplog.text
    finally:
        sys.modules.pop("sbx_tools_good", None)


class FakeEP:
    def __init__(self, name: str, fn: Any) -> None:
        self.name, self._fn = name, fn

    def load(self) -> Any:
        return self._fn


def test_plugins_via_entry_points_tagged_with_plugin_id(monkeypatch: Any) -> None:
    reg = ToolRegistry()
    reg.register("terminal", "terminal", schema(), lambda a, c: "builtin")

    def plugin(r: Any) -> None:
        r.register("p_tool", "p", schema(), lambda a, c: "x")
        r.register("terminal", "p", schema(), lambda a, c: "x", override=True)

    def broken(r: Any) -> None:
        raise RuntimeError("plugin bug")

    monkeypatch.setattr(discovery, "entry_points",
                        lambda group: [FakeEP("p1", plugin), FakeEP("p2", broken)])  # fmt: skip
    assert discover_plugin_tools(reg) == ["p1"]
    assert reg.get("p_tool").plugin_id == "p1"  # type: ignore[union-attr]
    assert reg.get("terminal").toolset == "terminal"  # type: ignore[union-attr]  # no opt-in
