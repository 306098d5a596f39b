"""The ``terminal`` tool: one shell command in the caller's session sandbox."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from environments.base import Environment, ExecResult, ShellState
from environments.errors import InvalidCommand, WorkdirNotFound
from environments.pty_exec import run_on_pty
from registry.approval.context import run_directory
from registry.approval.limits import CommandTooLong

from ..context import ToolContext
from ..core import ToolRegistry, registry

TERMINAL_SCHEMA: dict[str, Any] = {
    "description": (
        "Run a shell command in your sandbox. The working directory and exported "
        "environment variables persist between calls of your session. stdin is empty. "
        "Output is stdout and stderr interleaved; long output keeps its head and tail. "
        "A command that runs past `timeout` is killed with its whole process tree and "
        "returns exit code 124. Use `background: true` for servers and long jobs, then "
        "the `process` tool to poll, read logs, wait or kill."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "Shell command line to run."},
            "background": {
                "type": "boolean",
                "default": False,
                "description": "Start as a background process and return its process_id.",
            },
            "timeout": {
                "type": "integer",
                "minimum": 1,
                "description": "Seconds before the command is killed (foreground only).",
            },
            "workdir": {
                "type": "string",
                "description": "Directory to run this command in; defaults to the session's.",
            },
            "pty": {
                "type": "boolean",
                "default": False,
                "description": (
                    "Run on a pseudo-terminal: for programs that need a terminal, and for "
                    "background processes that take input (process write). In the "
                    "foreground, output has \\r\\n line ends and cd/export are not kept."
                ),
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
}


class TerminalArgs(BaseModel):
    """Validated arguments of ``terminal`` (docs/tool-calls.md)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    command: str = Field(min_length=1)
    background: bool = False
    timeout: int | None = Field(default=None, ge=1)
    workdir: str | None = None
    pty: bool = False


def _redact(text: str, ctx: ToolContext) -> str:
    if not ctx.redact_output:
        return text
    from process_registry.redact import redact_text

    redacted: str = redact_text(text)
    return redacted


def session_environment(ctx: ToolContext) -> dict[str, str] | None:
    """The session's exported variables as its shell last reported them (None: unknown):
    what ``$X`` in a command will expand to."""
    state = _session_state(ctx)
    return dict(state.env) if state is not None else None


def _session_state(ctx: ToolContext) -> ShellState | None:
    env = ctx.pool.get_existing(ctx.session_id, ctx.backend)
    return env.session_state() if env is not None else None


def _directory_state(ctx: ToolContext, held: Environment | None) -> ShellState | None:
    """The session's state, its sandbox started when there is none yet: a command is
    judged and approved in its directory, and a session's first command would otherwise
    be approved without one and asked again once the sandbox exists (None: the sandbox
    cannot start; the call itself will say why). ``held``: the session's sandbox when
    the caller holds it already (the pool's hold is not reentrant)."""
    known = _session_state(ctx) if held is None else held.session_state()
    if known is not None:
        return known  # every call after a session's first: no second hold of the sandbox
    try:
        if held is not None:
            return _started_state(held, ctx)
        with ctx.pool.use(ctx.session_id, ctx.backend) as env:
            return _started_state(env, ctx)
    except Exception:  # judged without a directory; running it reports the failure
        return None


def _started_state(env: Environment, ctx: ToolContext) -> ShellState | None:
    state = env.session_state()
    if state is None:
        env.exec(":", timeout=min(30.0, max(1.0, ctx.remaining() - 1.0)))  # starts the shell
        state = env.session_state()
    return state


def approval_refusal(
    command: str, ctx: ToolContext, *, workdir: str | None = None, held: Environment | None = None
) -> dict[str, Any] | None:
    """The refusal of ``command`` by the worker's approval guard (None: it may run, or
    there is no guard). Checked on every call, retries included: an allow may consume
    a once-approval. The command is judged, and approved, in the directory it runs in:
    ``workdir``, else the session's (:mod:`registry.approval.context`). ``held``: the
    session's sandbox when the caller is inside the pool's hold of it."""
    guard = ctx.components.get("approval")
    if guard is None:
        return None
    state = _directory_state(ctx, held)
    cwd = run_directory(state.cwd if state is not None else None, workdir)
    env = dict(state.env) if state is not None else None
    try:
        decision = guard.check(
            command, session_id=ctx.session_id, backend=ctx.backend, env=env, cwd=cwd
        )
    except CommandTooLong as exc:
        return {"error": str(exc), "status": "invalid"}
    refusal = decision.to_tool_result()
    return None if refusal is None else dict(refusal)


def _kill_grace(env: Any) -> float:
    grace = getattr(getattr(env, "config", None), "kill_grace", None)
    return float(grace) if isinstance(grace, int | float) else 2.0


def _pty_refusal(backend: str) -> dict[str, Any] | None:
    """The answer to a foreground ``pty: true`` on a backend without a pty (None: it has one)."""
    from environments.registry import backend_class, backends_with_pty

    try:
        if backend_class(backend).supports_pty:
            return None
    except Exception:  # an unknown or broken backend: the call itself says what is wrong
        return None
    able = ", ".join(backends_with_pty()) or "none installed here"
    return {
        "error": f"pty: true needs a backend with a pseudo-terminal and the {backend!r} "
        f"backend has none (backends with one: {able}); run the command without pty",
        "status": "unsupported",
    }


def handle_terminal(args: TerminalArgs, ctx: ToolContext) -> dict[str, Any]:
    """Run the command (or start it in the background) after the approval check.

    ``pty: true`` in the foreground runs on a pseudo-terminal
    (:mod:`environments.pty_exec`) where the backend has one, and is refused
    (``status: unsupported``, naming the backends that have one) where it has not.
    A streamed call (``ctx.on_output``) gets the output as it is read; on a pty, or a
    backend that cannot stream, all of it once the command ended.
    """
    if args.pty and not args.background:
        refusal = _pty_refusal(ctx.backend)
        if refusal is not None:
            return refusal
    refusal = approval_refusal(args.command, ctx, workdir=args.workdir)
    if refusal is not None:
        return refusal
    if args.background:
        processes = ctx.components.get("processes")
        if processes is None:
            return {"error": "background processes are not enabled on this worker"}
        return dict(processes.start_from_tool(args, ctx))
    timeout = min(args.timeout or ctx.default_timeout, ctx.max_timeout)
    # Leave the worker a moment to answer before the call's own deadline.
    timeout_s = max(0.1, min(float(timeout), ctx.remaining() - 0.5))
    live = ctx.on_output
    try:
        with ctx.pool.use(ctx.session_id, ctx.backend) as env:
            streams = live is not None and env.streams_output and not args.pty
            run: Callable[..., ExecResult]
            if args.pty:
                run = partial(run_on_pty, env, kill_grace=_kill_grace(env))
            elif streams:  # on_output only where the backend takes it (a plugin's may not)
                run = partial(env.exec, on_output=live)
            else:
                run = env.exec
            result = run(
                args.command,
                workdir=args.workdir,
                timeout=timeout_s,
                output_limit=ctx.output_limit,
                cancel=ctx.cancel,
            )
        if live is not None and not streams and result.output:
            live(result.output.encode())  # this backend cannot stream: all of it at the end
    except WorkdirNotFound as exc:
        cwd = exc.cwd if exc.cwd is not None else args.workdir or ""
        return {"output": "", "exit_code": 1, "error": _text(str(exc)),
                "cwd": _redact(_text(cwd), ctx), "truncated": False, "duration_ms": 0}  # fmt: skip
    except InvalidCommand as exc:
        return {"error": f"invalid command: {exc}"}
    error = None
    if result.cancelled:
        who = getattr(ctx.cancel, "reason", "the caller")
        error = f"cancelled by {who}; the command's process tree was killed"
    elif result.timed_out:
        error = f"command timed out after {timeout_s:g}s; its process tree was killed"
    elif result.shell_restarted:
        error = "the session shell had died and was restarted; cwd and variables were restored"
    answer: dict[str, Any] = {
        "output": _redact(result.output, ctx),
        "exit_code": result.exit_code,
        "error": error,
        # A directory may be named by a secret (`cd "$TOKEN"`): shown like the output.
        "cwd": _redact(_text(result.cwd), ctx),
        "truncated": result.truncated,
        "duration_ms": result.duration_ms,
    }
    if result.cancelled:
        answer["status"] = "cancelled"
    return answer


def _text(path: str) -> str:
    # A cwd the shell reported in bytes that are not UTF-8 is held with surrogate
    # escapes; a model gets text, with U+FFFD for those bytes.
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def register(target: ToolRegistry = registry) -> None:
    """Register ``terminal`` into ``target``."""
    target.register(
        "terminal",
        "terminal",
        TERMINAL_SCHEMA,
        handle_terminal,
        args_model=TerminalArgs,
        emoji="💻",
    )


register()
