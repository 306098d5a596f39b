"""CLI commands for identity: ``sbx session token|revoke|continue``, ``sbx keys``,
``sbx approver token`` (docs/cli.md, "Sessions, keys and approvers").

Minting and revoking need a key (``SBX_SECRET_KEY`` or the keyring under
``SBX_HOME``): without one they exit 3. ``continue`` needs both sessions'
tokens: the parent's (``SBX_SESSION_TOKEN`` with ``SBX_SESSION_ID`` = PARENT)
and the child's consent (``SBX_CHILD_SESSION_TOKEN``); each is minted instead
where this machine holds a key.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from worker.settings import Settings, get_settings

from .output import EXIT_DENIED, EXIT_OK, EXIT_USAGE, emit, fail

_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd]?)\Z")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """Seconds in ``text`` (``90``, ``90s``, ``30m``, ``8h``, ``2d``); ValueError otherwise."""
    m = _DURATION.match(text.strip().lower())
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"not a duration: {text!r} (e.g. 90s, 30m, 8h, 2d)")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def _need_key(settings: Settings) -> None:
    from worker.identity import can_mint

    if not can_mint(settings):
        fail("no secret key here: set SBX_SECRET_KEY or run on the worker's machine "
             f"(expected {settings.secret_path})", EXIT_DENIED)  # fmt: skip


def _session_id(text: str) -> str:
    from process_registry.tokens.formats import InvalidSessionId, validate_session_id

    try:
        return validate_session_id(text)
    except InvalidSessionId as exc:
        fail(str(exc), EXIT_USAGE)


def _ledger(settings: Settings) -> Any:
    from worker.broker.connection import redis_client, resolve_broker_url, resolve_ledger_url

    return redis_client(resolve_ledger_url(settings, resolve_broker_url(settings)))


def cmd_session(args: argparse.Namespace) -> int:
    settings = get_settings()
    if args.action == "continue":
        return _continue(args, settings)
    if len(args.ids) != 1:
        fail(f"usage: sbx session {args.action} SESSION_ID", EXIT_USAGE)
    session = _session_id(args.ids[0])
    from .session_key import ensure_signing_key

    created = ensure_signing_key(settings)  # exit 3 without one, unless embedded
    if created is not None:
        sys.stderr.write(f"sbx: created the secret key {created} (mode 0600); workers "
                         "using this home verify tokens with it\n")  # fmt: skip
    from worker.identity import load_signer
    from worker.protocol.revocations import read_epoch, revoke

    ledger = _ledger(settings)
    if args.action == "revoke":
        epoch = revoke(ledger, session, settings.home)
        emit({"session_id": session, "revoked": True, "epoch": epoch}, as_json=args.json,
             human=f"revoked {session}: its tokens minted before now no longer verify")  # fmt: skip
        return EXIT_OK
    try:
        ttl = parse_duration(args.ttl) if args.ttl else settings.token_ttl
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    signer = load_signer(settings, create=False)
    token = signer.token(session, ttl=ttl, epoch=read_epoch(ledger, session, settings.home))
    expires = int(time.time() + ttl)
    emit({"session_id": session, "token": token, "expires": expires}, as_json=args.json,
         human=token)  # fmt: skip
    return EXIT_OK


def _continue(args: argparse.Namespace, settings: Settings) -> int:
    from worker.client import SandboxClient
    from worker.errors import ProcessError, exit_code_for

    if len(args.ids) != 2:
        fail("usage: sbx session continue PARENT_ID CHILD_ID", EXIT_USAGE)
    parent, child = (_session_id(i) for i in args.ids)
    with SandboxClient(session_id=parent, settings=settings) as client:
        try:
            done = client.continue_session(child)
        except ProcessError as exc:
            if exc.status == "denied":
                fail("permission denied: continuing needs the parent's token "
                     "(SBX_SESSION_TOKEN) and the child's (SBX_CHILD_SESSION_TOKEN)",
                     EXIT_DENIED)  # fmt: skip
            fail(str(exc), exit_code_for(exc.status))
    emit(done.model_dump(), as_json=args.json, human=f"{done.child} continues {done.parent}")
    return EXIT_OK


def cmd_keys(args: argparse.Namespace) -> int:
    from process_registry.tokens.keyring import KeyringError
    from worker.identity import keyring_store

    settings = get_settings()
    store = keyring_store(settings)
    try:
        if args.action == "rotate":
            key = store.add()
            emit({"kid": key.kid}, as_json=args.json,
                 human=f"added key {key.kid}: it signs from now on")  # fmt: skip
            if settings.secret_key is not None:
                sys.stderr.write("sbx: SBX_SECRET_KEY is set and keeps signing\n")
            return EXIT_OK
        if args.action == "import":
            key = store.add(sys.stdin.buffer.read().strip())
            emit({"kid": key.kid}, as_json=args.json, human=f"imported key {key.kid}")
            return EXIT_OK
        if args.action == "remove":
            if not args.kid:
                fail("usage: sbx keys remove KID", EXIT_USAGE)
            key = store.remove(args.kid)
            emit({"kid": key.kid, "removed": True}, as_json=args.json,
                 human=f"removed key {key.kid}: what it signed no longer verifies")  # fmt: skip
            return EXIT_OK
        ring = store.current()
    except KeyringError as exc:
        fail(str(exc), EXIT_USAGE)
    rows = [{"kid": k.kid, "source": k.source, "signing": k is ring.signing,
             "created": None if k.source == "env" else k.created} for k in ring.keys]  # fmt: skip
    human = "\n".join(f"{r['kid']}  {r['source']}{'  (signs)' if r['signing'] else ''}"
                      for r in rows)  # fmt: skip
    emit(rows, as_json=args.json, human=human)
    return EXIT_OK


def cmd_approver(args: argparse.Namespace) -> int:
    from process_registry.tokens.approver import approver_token
    from worker.identity import keyring_store

    settings = get_settings()
    _need_key(settings)
    token = approver_token(keyring_store(settings).current())
    emit({"approver_token": token}, as_json=args.json, human=token)
    return EXIT_OK


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine output: one JSON document")


def add_session_commands(sub: Any) -> None:
    """Register ``session``, ``keys`` and ``approver`` on ``sub``."""
    p = sub.add_parser("session", help="session tokens, revocation and continuations")
    p.add_argument("action", choices=["token", "revoke", "continue"])
    p.add_argument("ids", nargs="+", metavar="SESSION_ID")
    p.add_argument("--ttl", help="token lifetime (90s, 30m, 8h, 2d; default SBX_TOKEN_TTL)")
    _add_json(p)
    p.set_defaults(func=cmd_session)

    p = sub.add_parser("keys", help="the signing keys: list, rotate, import (stdin), remove")
    p.add_argument("action", choices=["list", "rotate", "import", "remove"])
    p.add_argument("kid", nargs="?", help="key id (remove)")
    _add_json(p)
    p.set_defaults(func=cmd_keys)

    p = sub.add_parser("approver", help="the approver credential (for SBX_APPROVER_TOKEN)")
    p.add_argument("action", choices=["token"])
    _add_json(p)
    p.set_defaults(func=cmd_approver)
