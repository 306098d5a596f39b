"""Core CLI commands: worker, exec, call, tools, doctor, broker."""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import shlex
import sys
import uuid
from typing import Any

from worker.errors import exit_code_for
from worker.settings import Settings, get_settings

from .output import EXIT_OK, EXIT_USAGE, emit, fail
from .waiting import untaken_notice

Sub = "argparse._SubParsersAction[argparse.ArgumentParser]"
log = logging.getLogger("worker.service.runner")


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine output: one JSON document")


def cli_session_id(settings: Settings) -> str:
    """The CLI's session: ``SBX_SESSION_ID``, else one stable session per local user."""
    return settings.session_id or f"cli-{getpass.getuser()}"


def session_client(settings: Settings, backend: str | None = None) -> Any:
    """A client of the CLI's session (``cli_session_id``), on ``backend`` when given."""
    from worker.client import SandboxClient

    return SandboxClient(session_id=cli_session_id(settings), backend=backend, settings=settings)


def cmd_worker(args: argparse.Namespace) -> int:
    from celery.signals import worker_ready

    from worker.broker.embedded import stopped_on_abort
    from worker.identity import keyring_store
    from worker.service.backends import check_backend_names, isolation_notice
    from worker.service.runner import run_worker

    if args.json:  # JSON log lines: the same switch as SBX_LOG_FORMAT=json
        os.environ["SBX_LOG_FORMAT"] = "json"
        get_settings.cache_clear()
    settings = get_settings()
    check_backend_names(settings)  # before anything starts
    keyring_store(settings).current(create=True)  # a key it may not use stops it here
    queues = args.queues.split(",") if args.queues else None
    notice = isolation_notice(settings)
    if notice is not None:
        # Said once the worker's logging is set up, beside its "ready" line.
        warn, text = notice
        worker_ready.connect(
            lambda **_: log.log(logging.WARNING if warn else logging.INFO, text), weak=False
        )
    with stopped_on_abort(settings.home, settings.embedded_redis_server):
        run_worker(settings, broker_url=args.broker, queues=queues,
                   concurrency=args.concurrency, loglevel=args.loglevel, events=args.events)
    return EXIT_OK


def _command_text(words: list[str]) -> str:
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        fail("no command given: sbx exec -- CMD...", EXIT_USAGE)
    return words[0] if len(words) == 1 else shlex.join(words)


def cmd_exec(args: argparse.Namespace) -> int:
    settings = get_settings()
    command = _command_text(args.cmd)
    call: dict[str, Any] = {"command": command}
    if args.workdir:
        call["workdir"] = args.workdir
    if args.timeout:
        call["timeout"] = args.timeout
    if args.pty:
        call["pty"] = True
    with session_client(settings, args.backend) as client:
        run = _call if args.json else _call_live  # --json: one document, at the end
        result = run(client, call)
        if result.get("status") == "approval_required" and _interactive(args):
            result = _ask_and_retry(client, call, result, run)
    if args.json:
        emit(result, as_json=True)
    status = result.get("status")
    if status in ("approval_required", "blocked", "denied"):
        reason = result.get("description") or result.get("error") or status
        extra = f" (approval id {result['approval_id']})" if result.get("approval_id") else ""
        fail(f"{status}: {reason}{extra}", exit_code_for(status))
    if result.get("exit_code") is None:
        fail(result.get("error") or "the call returned no exit code", exit_code_for(status))
    if result.get("error") and not args.json:
        sys.stderr.write(f"sbx: {result['error']}\n")
    return int(result["exit_code"])


def _call(client: Any, call: dict[str, Any]) -> dict[str, Any]:
    call_id = uuid.uuid4().hex
    with untaken_notice(client, call_id):
        result: dict[str, Any] = json.loads(client.tool_call("terminal", call, call_id=call_id))
    return result


def _call_live(client: Any, call: dict[str, Any]) -> dict[str, Any]:
    """The terminal call, its output printed while the command runs; its result."""
    call_id = uuid.uuid4().hex
    with untaken_notice(client, call_id):
        return _printed(client.tool_stream("terminal", call, call_id=call_id))


def _printed(stream: Any) -> dict[str, Any]:
    """Print ``stream``'s pieces as they come; its result."""
    while True:
        try:
            piece = next(stream)
        except StopIteration as done:
            result: dict[str, Any] = json.loads(done.value)
            return result
        sys.stdout.buffer.write(piece)
        sys.stdout.flush()


def _interactive(args: argparse.Namespace) -> bool:
    return not args.json and sys.stdin.isatty() and sys.stderr.isatty()


def _ask_and_retry(
    client: Any, call: dict[str, Any], refusal: dict[str, Any], run: Any
) -> dict[str, Any]:
    """Ask the person at the terminal; on approval, retry the call once with ``run``."""
    from registry.approval import prompt_for_approval

    answer = prompt_for_approval(
        call["command"], refusal.get("description") or "", stdin=sys.stdin, stdout=sys.stderr
    )
    if answer == "deny":
        client.deny(refusal["approval_id"])
        return {**refusal, "status": "blocked", "error": "denied at the terminal"}
    approved = client.approve(refusal["approval_id"], answer)
    if approved.status != "approved":
        return {**refusal, "error": approved.error}
    result: dict[str, Any] = run(client, call)
    return result


def cmd_approval(args: argparse.Namespace) -> int:
    settings = get_settings()
    with session_client(settings) as client:
        if args.action == "approve":
            result = client.approve(args.approval_id, args.scope)
        else:
            result = client.deny(args.approval_id)
    payload = result.model_dump()
    human = f"{result.status}: {result.approval_id}" + (
        f" ({result.error})" if result.error else ""
    )
    emit(payload, as_json=args.json, human=human)
    if result.status in ("approved", "denied") and not result.error:
        return EXIT_OK  # the answer was taken
    return exit_code_for(result.status)


def cmd_call(args: argparse.Namespace) -> int:
    """The result exactly as a model sees it; ``--json`` wraps it in one document:
    ``{"tool", "session_id", "result", "is_json"}`` (``result`` decoded when the tool
    answered JSON, which built-in tools always do, else its text)."""
    settings = get_settings()
    session_id = cli_session_id(settings)
    call_id = uuid.uuid4().hex
    with session_client(settings, args.backend) as client, untaken_notice(client, call_id):
        raw = client.tool_call(args.tool, args.args, call_id=call_id)
    if not args.json:
        sys.stdout.write(raw + "\n")
        return EXIT_OK
    try:
        result, is_json = json.loads(raw), True
    except ValueError:
        result, is_json = raw, False
    emit({"tool": args.tool, "session_id": session_id, "result": result, "is_json": is_json},
         as_json=True)  # fmt: skip
    return EXIT_OK


def cmd_tools(args: argparse.Namespace) -> int:
    """Tool definitions, plugins' tools and MCP tools (from the shared snapshot: never
    connects) included; ``--scope`` and ``--context-window`` as a worker applies them."""
    from registry.core import registry
    from registry.deferral import expose_tools
    from registry.discovery import discover_builtin_tools
    from registry.mcp import sync_mcp_tools_to_registry
    from registry.plugins import load_plugins_once
    from registry.toolsets import LEGACY_TOOLSET_MAP, PLATFORM_PRESETS, all_toolset_names
    from worker.service.mcp import open_offline_catalog

    settings = get_settings()
    scope = _json_object(args.scope, "--scope") if args.scope else {}
    discover_builtin_tools()
    load_plugins_once(settings.plugins)
    if settings.mcp_servers:  # what workers last saw; a never-seen server contributes nothing
        sync_mcp_tools_to_registry(registry, open_offline_catalog(settings))
    enabled = args.toolsets.split(",") if args.toolsets else None
    known = all_toolset_names() | set(LEGACY_TOOLSET_MAP) | set(PLATFORM_PRESETS)
    unknown = sorted(set(enabled or ()) - known)
    if unknown:
        fail(f"unknown toolset(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}",
             EXIT_USAGE)  # fmt: skip
    shown = expose_tools(
        registry, toolsets=enabled, scope=scope, context_window=args.context_window
    )
    lines = [f"{d['function']['name']}: {d['function'].get('description', '')[:90]}"
             for d in shown.tools]  # fmt: skip
    if shown.deferred:
        lines.append("deferred: " + ", ".join(e.name for e in shown.deferred))
    value: Any = shown.tools
    if args.context_window is not None:  # the shape of the client's tool_definitions
        value = {"tools": shown.tools, "deferred": [e.name for e in shown.deferred],
                 "system_prompt": shown.system_prompt_section()}  # fmt: skip
    emit(value, as_json=args.json, human="\n".join(lines))
    return EXIT_OK


def _json_object(text: str, option: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        fail(f"{option} takes a JSON object: {exc}", EXIT_USAGE)
    if not isinstance(value, dict):
        fail(f"{option} takes a JSON object, not {type(value).__name__}", EXIT_USAGE)
    return value


def cmd_doctor(args: argparse.Namespace) -> int:
    """Backends, broker, ledger and configured MCP servers (from the snapshot: never connects)."""
    from worker.broker.connection import display_url, resolve_ledger_url
    from worker.broker.embedded import EmbeddedBroker
    from worker.broker.urls import url_scheme
    from worker.service.backends import check_backend_names
    from worker.service.mcp import open_offline_catalog

    settings = get_settings()
    check_backend_names(settings)  # like any invalid setting: one line, exit 2
    backends, configs = _backend_report(settings)
    embedded = EmbeddedBroker(settings.home, settings.embedded_redis_server)

    def where(url: str | None) -> dict[str, Any]:  # never connects; passwords masked
        if url is None or url == embedded.url:
            return {**embedded.status(), "embedded": True, "transport": "redis"}
        return {"url": display_url(url), "embedded": False, "transport": url_scheme(url)}

    broker = where(settings.broker_url)
    ledger = where(resolve_ledger_url(settings, start_embedded=False))
    catalog = open_offline_catalog(settings)
    mcp = [catalog.status(sid) for sid in sorted(catalog.servers)]
    report = {"home": str(settings.home), "default_backend": settings.backend,
              "backends": backends, "configs": configs, "broker": broker, "ledger": ledger,
              "mcp_servers": mcp}  # fmt: skip
    lines = [f"home: {settings.home}", f"broker: {broker}", f"ledger: {ledger}"]
    lines += [
        f"  {'ok ' if v['available'] else 'no '} {k}: {v['reason']}" for k, v in backends.items()
    ]
    isolation = _isolation_line(settings, configs.get("local"))
    if isolation:
        report["local_isolation"] = isolation
        lines.append(f"local isolation: {isolation}")
    lines += [f"  config {k}: {json.dumps(v)}" for k, v in configs.items()]
    for m in mcp:
        tools = "never refreshed" if m["cached_tools"] is None else f"{m['cached_tools']} tools"
        state = "enabled" if m["enabled"] else "disabled"
        error = f"; last refresh failed: {m['last_error']}" if m["last_error"] else ""
        lines.append(f"  mcp {m['id']} ({state}): {tools}{error}")
    emit(report, as_json=args.json, human="\n".join(lines))
    return EXIT_OK


def _isolation_line(settings: Settings, local: dict[str, Any] | None) -> str:
    """How the local backend isolates sandboxes, said plainly ("" when it is not there)."""
    from environments.backends.local.config import NO_ISOLATION

    if local is None:
        return ""
    if local.get("isolation") == "none":
        return f"none (SBX_LOCAL_ISOLATION=none): {NO_ISOLATION}"
    return f"bubblewrap jail, network {local.get('network')}, file system {local.get('filesystem')}"


def _backend_report(
    settings: Settings,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """``(availability by backend name, effective config by backend)``; secrets masked."""
    from environments.errors import UnknownBackend
    from environments.registry import backend_availability, backend_names, canonical_name
    from worker.service.backends import worker_backend_config
    from worker.settings import SettingsError

    backends: dict[str, dict[str, Any]] = {}
    configs: dict[str, dict[str, Any]] = {}
    for name in backend_names(with_aliases=True):
        try:
            config = worker_backend_config(settings, name)
        except SettingsError as exc:
            backends[name] = {"available": False, "reason": str(exc)}
            continue
        except (UnknownBackend, ImportError):
            config = None
        ok, reason = backend_availability(name, config)
        backends[name] = {"available": ok, "reason": reason}
        if config is not None:
            configs[canonical_name(name)] = config.public_view()
    return backends, configs


def cmd_broker(args: argparse.Namespace) -> int:
    from worker.broker.embedded import EmbeddedBroker

    settings = get_settings()
    if settings.broker_url:
        fail("SBX_BROKER_URL is set: sbx does not manage that broker", EXIT_USAGE)
    broker = EmbeddedBroker(settings.home, settings.embedded_redis_server)
    if args.action == "start":
        broker.ensure_running()
    elif args.action == "stop":
        broker.stop()
    status = broker.status()
    emit(status, as_json=args.json, human=f"{'running' if status['running'] else 'stopped'}: "
         f"{status['url']}")  # fmt: skip
    return EXIT_OK


def add_core_commands(sub: Any) -> None:
    """Register the core sub-commands on ``sub`` (an argparse sub-parser action)."""
    p = sub.add_parser("worker", help="run a worker")
    p.add_argument("--broker", help="broker URL (default: SBX_BROKER_URL or embedded)")
    p.add_argument("--queues", help="comma-separated queues to consume")
    p.add_argument("--concurrency", type=int, help="threads running calls")
    p.add_argument("--loglevel", default="INFO")
    p.add_argument("--json", action="store_true", help="log lines as JSON (SBX_LOG_FORMAT=json)")
    p.add_argument(
        "--events",
        action="store_true",
        help="send Celery task events (Flower, celery-exporter); also SBX_EVENTS",
    )
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("exec", help="run one foreground command through the worker")
    p.add_argument("--backend")
    p.add_argument("--workdir")
    p.add_argument("--timeout", type=int)
    p.add_argument("--pty", action="store_true", help="run it on a pseudo-terminal")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    _add_json(p)
    p.set_defaults(func=cmd_exec)

    p = sub.add_parser("call", help="one raw tool call; prints the tool result JSON")
    p.add_argument("tool")
    p.add_argument("args", nargs="?", default="{}")
    p.add_argument("--backend")
    _add_json(p)
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("approve", help="approve a command refused with approval_required")
    p.add_argument("approval_id")
    p.add_argument("--scope", choices=["once", "session", "always"], default="once")
    _add_json(p)
    p.set_defaults(func=cmd_approval, action="approve")

    p = sub.add_parser("deny", help="deny a command refused with approval_required")
    p.add_argument("approval_id")
    _add_json(p)
    p.set_defaults(func=cmd_approval, action="deny")

    p = sub.add_parser("tools", help="model-facing tool definitions")
    p.add_argument("--toolsets", help="comma-separated toolsets")
    p.add_argument("--scope", help="JSON object each tool's applies(scope) is asked about")
    p.add_argument("--context-window", type=int, metavar="TOKENS",
                   help="the model's context window: large tool sets are deferred")  # fmt: skip
    _add_json(p)
    p.set_defaults(func=cmd_tools)

    p = sub.add_parser("doctor", help="which backends work here and why not")
    _add_json(p)
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("broker", help="the embedded broker: start, stop, status")
    p.add_argument("action", choices=["start", "stop", "status"])
    _add_json(p)
    p.set_defaults(func=cmd_broker)
