"""Finding tools: built-in modules by AST scan, plugins through entry points.

AST rule (documented contract): a module under the tools folder is imported iff
its *module body* holds a call statement whose callee is the bare name
``register`` or the attribute ``registry.register`` (``x = register(...)`` counts
too). Statements nested in top-level ``if``/``try``/``with`` blocks count, since
those still run at import; calls inside ``def``/``class`` bodies do not, so helper
modules that merely define registration functions are not imported.
``registry/tools/terminal.py`` ends with a top-level ``register()`` call to its own
``register`` function and is found by the bare-name branch of this rule.

An import that fails (an optional tool missing its dependency) is logged and
skipped; the other tools still load.

Plugins: every entry point in group ``sbx.tools`` names a callable taking a
:class:`PluginRegistrar`. Its registrations carry the plugin id (the entry point
name), so overriding a built-in needs ``plugins.entries.<id>.allow_tool_override``.
A plugin may also add ``pre_tool_call``/``post_tool_call`` hooks and offer an
argument-repair callback (:mod:`registry.plugins` decides which one is used).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import logging
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from .core import RepairFn, ToolEntry, ToolRegistry
from .core import registry as default_registry
from .hooks import Hook, HookRegistry
from .hooks import hooks as default_hooks

log = logging.getLogger(__name__)

PLUGIN_GROUP = "sbx.tools"
_SKIP = frozenset({"__init__.py"})


def _is_register_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    fn = node.func
    if isinstance(fn, ast.Name):
        return fn.id == "register"
    return (
        isinstance(fn, ast.Attribute)
        and fn.attr == "register"
        and isinstance(fn.value, ast.Name)
        and fn.value.id == "registry"
    )


def _body_registers(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign) and stmt.value is not None:
            if _is_register_call(stmt.value):
                return True
        elif isinstance(stmt, ast.If):
            if _body_registers(stmt.body) or _body_registers(stmt.orelse):
                return True
        elif isinstance(stmt, ast.Try):
            blocks = [stmt.body, stmt.orelse, stmt.finalbody, *(h.body for h in stmt.handlers)]
            if any(_body_registers(b) for b in blocks):
                return True
        elif isinstance(stmt, ast.With) and _body_registers(stmt.body):
            return True
    return False


def module_registers_tools(path: Path) -> bool:
    """Whether ``path`` has a top-level registration call (see module doc); unparsable = no."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        log.warning("cannot parse %s: %s", path, exc)
        return False
    return _body_registers(tree.body)


def discover_builtin_tools(tools_dir: str | Path | None = None) -> list[str]:
    """Import every registering module of ``tools_dir`` (default ``registry/tools``).

    Returns the imported module names. Modules of the default folder import as
    ``registry.tools.<stem>``; modules of another folder import by file location as
    ``sbx_tools_<stem>`` (they should use absolute imports).
    """
    default = Path(__file__).parent / "tools"
    folder = Path(tools_dir) if tools_dir is not None else default
    is_default = folder.resolve() == default.resolve()
    imported = []
    for path in sorted(folder.glob("*.py")):
        if path.name in _SKIP or not module_registers_tools(path):
            continue
        modname = f"registry.tools.{path.stem}" if is_default else f"sbx_tools_{path.stem}"
        try:
            if is_default:
                importlib.import_module(modname)
            elif modname not in sys.modules:
                spec = importlib.util.spec_from_file_location(modname, path)
                if spec is None or spec.loader is None:
                    raise ImportError(f"no loader for {path}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[modname] = module
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    sys.modules.pop(modname, None)
                    raise
        except Exception as exc:
            log.warning("optional tool module %s skipped: %s: %s", path.name,
                        type(exc).__name__, exc)  # fmt: skip
            continue
        imported.append(modname)
    return imported


class PluginRegistrar:
    """What a plugin's entry point receives: ``register`` tagged with the plugin id,
    ``register_hook`` and ``register_repair``."""

    def __init__(
        self,
        registry: ToolRegistry,
        plugin_id: str,
        hooks: HookRegistry | None = None,
        repairs: dict[str, RepairFn] | None = None,
    ) -> None:
        self.registry = registry
        self.plugin_id = plugin_id
        self.hooks = hooks if hooks is not None else default_hooks
        self.repairs: dict[str, RepairFn] = {} if repairs is None else repairs

    def register(self, *args: Any, **kwargs: Any) -> ToolEntry | None:
        """:meth:`ToolRegistry.register` with ``plugin_id`` set to this plugin."""
        kwargs["plugin_id"] = self.plugin_id
        return self.registry.register(*args, **kwargs)

    def register_hook(self, event: str, hook: Hook) -> None:
        """Add a ``pre_tool_call`` or ``post_tool_call`` hook (:mod:`registry.hooks`)."""
        self.hooks.register_hook(event, hook)

    def register_repair(self, repair: RepairFn) -> None:
        """Offer an argument-repair callback (:mod:`registry.repair`); it is used only
        where the operator names this plugin in ``plugins.repair``."""
        self.repairs[self.plugin_id] = repair


def discover_plugin_tools(
    registry: ToolRegistry = default_registry,
    *,
    hooks: HookRegistry | None = None,
    repairs: dict[str, RepairFn] | None = None,
    skip: frozenset[str] = frozenset(),
) -> list[str]:
    """Load entry points of group ``sbx.tools`` (but those named in ``skip``); returns the
    ids of plugins that loaded. Their hooks go to ``hooks``, their repairs to ``repairs``."""
    loaded = []
    for ep in entry_points(group=PLUGIN_GROUP):
        if ep.name in skip:
            continue
        try:
            ep.load()(PluginRegistrar(registry, ep.name, hooks, repairs))
        except Exception as exc:
            log.warning("tool plugin %s skipped: %s: %s", ep.name, type(exc).__name__, exc)
            continue
        loaded.append(ep.name)
    return loaded
