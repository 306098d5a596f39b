"""``sbx cp``: files into and out of the session's sandbox (docs/cli.md).

``sbx cp LOCAL :REMOTE`` uploads, ``sbx cp :REMOTE LOCAL`` downloads; exactly one
side is remote, written with a leading ``:``. ``-`` as LOCAL is stdin or stdout.
A REMOTE ending in ``/`` (or empty) and a LOCAL that is a directory take the
other side's file name. Exit status: 0 copied, 2 usage or a file over the size
limit, 3 denied, 4 not found (either side), 1 anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import posixpath
import sys
import tempfile
from pathlib import Path
from typing import Any

from worker.settings import get_settings

from .commands import session_client
from .output import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, emit, fail


def _read_local(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(source).read_bytes()
    except FileNotFoundError:
        fail(f"no such local file: {source}", EXIT_NOT_FOUND)
    except IsADirectoryError:
        fail(f"{source} is a directory: sbx cp copies one file", EXIT_USAGE)


def _write_local(dest: str, data: bytes) -> str:
    """Write ``data`` to ``dest`` (replaced atomically); the path written, or ``-``."""
    if dest == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return dest
    target = Path(dest)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        fail(f"no such local directory: {folder}", EXIT_NOT_FOUND)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return str(target)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def cmd_cp(args: argparse.Namespace) -> int:
    source, dest = args.source, args.dest
    if source.startswith(":") == dest.startswith(":"):
        fail("exactly one side is remote, written :PATH: sbx cp LOCAL :REMOTE or "
             "sbx cp :REMOTE LOCAL", EXIT_USAGE)  # fmt: skip
    report: dict[str, Any] = {"source": source, "dest": dest}
    with session_client(get_settings(), args.backend) as client:
        if dest.startswith(":"):
            remote = dest[1:]
            if not remote or remote.endswith("/"):
                if source == "-":
                    fail("name the remote file when copying from stdin", EXIT_USAGE)
                remote += Path(source).name
            info = client.upload(remote, _read_local(source))
            report.update(dest=f":{info.path}", size=info.size, sha256=info.sha256)
        else:
            remote = source[1:]
            data = client.download(remote)
            if dest != "-" and Path(dest).is_dir():
                dest = str(Path(dest) / posixpath.basename(remote.rstrip("/")))
            report.update(dest=_write_local(dest, data), size=len(data))
    if args.json or report["dest"] != "-":  # downloaded to stdout: the bytes alone
        human = f"{report['source']} -> {report['dest']}: {report['size']} bytes"
        emit(report, as_json=args.json, human=human)
    return EXIT_OK


def add_cp_command(sub: Any) -> None:
    """Register ``sbx cp`` on ``sub`` (an argparse sub-parser action)."""
    p = sub.add_parser("cp", help="copy a file into (LOCAL :REMOTE) or out of (:REMOTE LOCAL) "
                       "the session's sandbox")  # fmt: skip
    p.add_argument("source", help="LOCAL file (- for stdin) or :REMOTE path")
    p.add_argument("dest", help=":REMOTE path or LOCAL file (- for stdout)")
    p.add_argument("--backend")
    p.add_argument("--json", action="store_true", help="machine output: one JSON document")
    p.set_defaults(func=cmd_cp)
