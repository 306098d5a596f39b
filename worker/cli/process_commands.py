"""CLI commands for background processes, receipts and sessions (docs/cli.md).

``sbx start|ps|poll|logs|wait|kill``, ``sbx receipts list|show|verify|prune``,
``sbx session token|continue``. Session-scoped commands act as
``SBX_SESSION_ID`` with ``SBX_SESSION_TOKEN`` (see ``cli_session_id``). Exit
status: 3 when the worker denies the session (nothing protected is printed),
4 for an unknown process or receipt, 2 for bad input, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from worker.settings import Settings, get_settings

from .commands import cli_session_id
from .output import EXIT_DENIED, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, emit, fail


def _client(settings: Settings, backend: str | None = None, session: str | None = None) -> Any:
    from worker.client import SandboxClient

    return SandboxClient(
        session_id=session or cli_session_id(settings), backend=backend, settings=settings
    )


def _run(action: Any) -> Any:
    """``action()``, with a ProcessError turned into the CLI's one-line error and exit code."""
    from worker.errors import ProcessError, exit_code_for

    try:
        return action()
    except ProcessError as exc:
        if exc.status == "denied":
            fail("permission denied: this session may not do that (check SBX_SESSION_ID and "
                 "SBX_SESSION_TOKEN)", EXIT_DENIED)  # fmt: skip
        fail(str(exc), exit_code_for(exc.status))


def _status_line(p: Any) -> str:
    code = "" if p.exit_code is None else f" exit={p.exit_code}"
    return f"{p.process_id}  {p.status}{code}  pid={p.pid}  {p.command}"


def cmd_start(args: argparse.Namespace) -> int:
    words = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not words:
        fail("no command given: sbx start -- CMD...", EXIT_USAGE)
    import shlex

    command = words[0] if len(words) == 1 else shlex.join(words)
    with _client(get_settings(), args.backend) as client:
        started = _run(lambda: client.start(command, workdir=args.workdir, pty=args.pty))
    emit(started.model_dump(), as_json=args.json, human=started.process_id)
    return EXIT_OK


def cmd_ps(args: argparse.Namespace) -> int:
    with _client(get_settings()) as client:
        procs = _run(client.processes)
    emit([p.model_dump() for p in procs], as_json=args.json,
         human="\n".join(_status_line(p) for p in procs))  # fmt: skip
    return EXIT_OK


def cmd_poll(args: argparse.Namespace) -> int:
    with _client(get_settings()) as client:
        p = _run(lambda: client.poll(args.id))
    emit(p.model_dump(), as_json=args.json, human=_status_line(p))
    return EXIT_OK


def cmd_logs(args: argparse.Namespace) -> int:
    offset = 0
    texts: list[str] = []
    with _client(get_settings()) as client:
        while True:
            chunk = _run(lambda at=offset: client.logs(args.id, at))
            if args.json:
                texts.append(chunk.text)
            else:
                sys.stdout.write(chunk.text)
                sys.stdout.flush()
            moved = chunk.next_offset > offset
            offset = chunk.next_offset
            if chunk.eof:
                break
            if not moved:
                if not args.follow:
                    break
                # Nothing new: block on the process's end (wakes at once when it ends).
                _run(lambda: client.wait(args.id, timeout=1))
    if args.json:
        emit({"process_id": args.id, "text": "".join(texts), "next_offset": offset},
             as_json=True)  # fmt: skip
    return EXIT_OK


def cmd_wait(args: argparse.Namespace) -> int:
    if args.all:
        with _client(get_settings()) as client:
            items = _run(lambda: client.linger(args.timeout or get_settings().max_timeout))
        human = "\n".join(_status_line(p) for p in items)
        emit([p.model_dump() for p in items], as_json=args.json, human=human)
        return EXIT_OK
    if not args.id:
        fail("sbx wait needs a process id (or --all)", EXIT_USAGE)
    with _client(get_settings()) as client:
        p = _run(lambda: client.wait(args.id, timeout=args.timeout))
    emit(p.model_dump(), as_json=args.json, human=_status_line(p))
    return EXIT_OK


def cmd_kill(args: argparse.Namespace) -> int:
    with _client(get_settings()) as client:
        p = _run(lambda: client.kill(args.id))
    emit(p.model_dump(), as_json=args.json, human=_status_line(p))
    return EXIT_OK


def cmd_receipts(args: argparse.Namespace) -> int:
    with _client(get_settings()) as client:
        if args.action == "list":
            items = _run(client.receipts)
            human = "\n".join(
                f"{r.process_id}  {r.status}  exit={r.exit_code}  {r.command}" for r in items
            )
            emit([r.model_dump() for r in items], as_json=args.json, human=human)
        elif args.action == "show":
            if not args.id:
                fail("sbx receipts show needs a process id", EXIT_USAGE)
            r = _run(lambda: client.receipt(args.id))
            emit(r.model_dump(), as_json=args.json, human=r.model_dump_json(indent=2))
        elif args.action == "verify":
            problems = _run(client.verify_receipts)
            emit({"ok": not problems, "problems": problems}, as_json=args.json,
                 human="\n".join(problems) if problems else "ok: receipts intact")  # fmt: skip
            return EXIT_FAILURE if problems else EXIT_OK
        else:
            pruned = _run(client.prune_receipts)
            emit({"pruned": pruned}, as_json=args.json, human=f"pruned {pruned} receipt(s)")
    return EXIT_OK


def cmd_session(args: argparse.Namespace) -> int:
    from process_registry.sessions import InvalidSessionId, validate_session_id

    settings = get_settings()
    if args.action == "token":
        from worker.identity import load_signer

        if len(args.ids) != 1:
            fail("usage: sbx session token SESSION_ID", EXIT_USAGE)
        try:
            validate_session_id(args.ids[0])
        except InvalidSessionId as exc:
            fail(str(exc), EXIT_USAGE)
        from .session_key import ensure_signing_key

        created = ensure_signing_key(settings)
        if created is not None:
            sys.stderr.write(f"sbx: created the secret key {created} (mode 0600); workers "
                             "using this home verify tokens with it\n")  # fmt: skip
        token = load_signer(settings).token(args.ids[0])
        emit({"session_id": args.ids[0], "token": token}, as_json=args.json, human=token)
        return EXIT_OK
    if len(args.ids) != 2:
        fail("usage: sbx session continue PARENT_ID CHILD_ID", EXIT_USAGE)
    parent, child = args.ids
    with _client(settings, session=parent) as client:
        done = _run(lambda: client.continue_session(child))
    emit(done.model_dump(), as_json=args.json, human=f"{done.child} continues {done.parent}")
    return EXIT_OK


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine output: one JSON document")


def add_process_commands(sub: Any) -> None:
    """Register the process, receipt and session sub-commands on ``sub``."""
    p = sub.add_parser("start", help="start a background process; prints its process id")
    p.add_argument("--backend")
    p.add_argument("--workdir")
    p.add_argument("--pty", action="store_true", help="run it on a pseudo-terminal")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    _add_json(p)
    p.set_defaults(func=cmd_start)

    p = sub.add_parser("ps", help="this session's background processes")
    _add_json(p)
    p.set_defaults(func=cmd_ps)

    for name, func, text in (
        ("poll", cmd_poll, "status of a background process"),
        ("kill", cmd_kill, "terminate a background process and its children"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("id")
        _add_json(p)
        p.set_defaults(func=func)

    p = sub.add_parser("logs", help="output of a background process")
    p.add_argument("id")
    p.add_argument("--follow", "-f", action="store_true", help="keep reading until it ends")
    _add_json(p)
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("wait", help="wait for a background process (or --all of them) to end")
    p.add_argument("id", nargs="?")
    p.add_argument("--all", action="store_true", help="linger for all of this session's processes")
    p.add_argument("--timeout", type=float, help="seconds to wait at most")
    _add_json(p)
    p.set_defaults(func=cmd_wait)

    p = sub.add_parser("receipts", help="results of finished processes: list, show, verify, prune")
    p.add_argument("action", choices=["list", "show", "verify", "prune"])
    p.add_argument("id", nargs="?")
    _add_json(p)
    p.set_defaults(func=cmd_receipts)

    p = sub.add_parser("session", help="session tokens and continuations")
    p.add_argument("action", choices=["token", "continue"])
    p.add_argument("ids", nargs="+", metavar="SESSION_ID")
    _add_json(p)
    p.set_defaults(func=cmd_session)
