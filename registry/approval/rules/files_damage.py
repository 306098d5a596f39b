"""Destroying or locking files without deleting them.

Truncation (``> f``, ``: > f``, ``truncate -s 0``, ``cp /dev/null f``),
``shred``, ``dd of=`` a regular file, raw disk reads, permission changes that
expose or lock files (``chmod 777``, ``chmod -R 000``, ``chown -R root``),
moving system or home directories away, ``rsync --delete`` and archivers that
remove their sources. Same contract as :mod:`registry.approval.rules`.
Targets under a temporary directory are exempt where the damage is to that
file only.
"""

from __future__ import annotations

import re

from registry.approval.rules.base import Pattern
from registry.approval.rules.paths import (
    is_block_device,
    is_hardline_delete_target,
    is_system_path,
)
from registry.approval.rules.scratch import is_scratch, is_temp_path
from registry.approval.shell.args import has_long, long_flags, operands, short_flags
from registry.approval.shell.dataflow import moved_away
from registry.approval.shell.resolve import Cmd

__all__ = ["DAMAGE_PATTERNS"]

_OCTAL_RE = re.compile(r"^[0-7]{1,5}$")
_SYMBOLIC_RE = re.compile(r"^[ugoa]*[-+=][rwxXstugo]*$")
_CLAUSE_RE = re.compile(r"^([ugoa]*)([-+=])([rwxXstugo]*)$")
_HARMLESS_SINKS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/")
_NO_OUTPUT = frozenset({":", "true", "false", ""})
_CHMOD = frozenset({"chmod"})
_RAW_READERS = frozenset({"dd", "cat", "cp", "pv", "head", "tail", "xxd", "od", "strings", "gzip"})


def _harmless_target(path: str) -> bool:
    return not path or path.startswith(_HARMLESS_SINKS) or is_temp_path(path)


def _writes_nothing(cmd: Cmd) -> bool:
    """True for commands whose output is empty: ``:``, ``true``, ``echo -n``, ``cat /dev/null``."""
    if cmd.name in _NO_OUTPUT:
        return True
    if cmd.name == "echo":
        return all(a in ("-n", "-e", "-E", "-ne", "-en", "") for a in cmd.args)
    if cmd.name == "printf":
        return not cmd.args or cmd.args[0] == ""
    return cmd.name == "cat" and operands(cmd.args) == ["/dev/null"]


def _truncate(cmd: Cmd) -> bool:
    if _writes_nothing(cmd) and any(
        r.truncates and not _harmless_target(r.target.text) for r in cmd.redirects
    ):
        return True
    if cmd.name == "cp" and operands(cmd.args)[:1] == ["/dev/null"]:
        dest = operands(cmd.args)[-1]
        return not _harmless_target(dest)
    if cmd.name != "truncate":
        return False
    sizes = [cmd.args[i + 1] for i, a in enumerate(cmd.args[:-1]) if a in ("-s", "--size")]
    sizes += [a[2:] for a in cmd.args if a.startswith("-s") and len(a) > 2]
    sizes += [a.split("=", 1)[1] for a in cmd.args if a.startswith("--size=")]
    reference = any(a in ("-r", "--reference") or a.startswith("--reference=") for a in cmd.args)
    # Without a size or a reference file, truncate refuses to run (an SQL TRUNCATE typed alone).
    shrinks = reference or any(not s.startswith(("+", ">")) for s in sizes)
    targets = operands(cmd.args, frozenset("sr"))
    return shrinks and any(not _harmless_target(t) for t in targets)


def _shred(cmd: Cmd) -> bool:
    if cmd.name not in ("shred", "srm", "wipe", "scrub"):
        return False
    targets = operands(cmd.args, frozenset("nsx"))
    return any(not is_block_device(t) and not is_temp_path(t) for t in targets)


def _dd_overwrite(cmd: Cmd) -> bool:
    if cmd.name != "dd":
        return False
    targets = [a[3:] for a in cmd.args if a.startswith("of=")]
    return any(not is_block_device(t) and not _harmless_target(t) for t in targets)


def _raw_device_read(cmd: Cmd) -> bool:
    if cmd.name == "dd":
        return any(a.startswith("if=") and is_block_device(a[3:]) for a in cmd.args)
    if any(r.op == "<" and is_block_device(r.target.text) for r in cmd.redirects):
        return True
    return cmd.name in _RAW_READERS and any(is_block_device(o) for o in operands(cmd.args))


def _chmod_mode(cmd: Cmd) -> str | None:
    for a in cmd.args:
        if a.startswith("--"):
            continue
        symbolic = all(_SYMBOLIC_RE.match(c) for c in a.split(","))
        if _OCTAL_RE.match(a) or (symbolic and (a[:1] != "-" or a[1:2] in "rwx")):
            return a
    return None


def _world_writable(mode: str) -> bool:
    if _OCTAL_RE.match(mode):
        return bool(int(mode[-1]) & 2)
    for clause in mode.split(","):
        m = _CLAUSE_RE.match(clause)
        if m and m.group(2) in "+=" and "w" in m.group(3) and set("oa") & set(m.group(1)):
            return True
    return False


def _locks_owner_out(mode: str) -> bool:
    if _OCTAL_RE.match(mode):
        digits = mode.zfill(3)
        return not int(digits[-3]) & 4
    for clause in mode.split(","):
        m = _CLAUSE_RE.match(clause)
        if not m:
            continue
        who, op, perms = m.groups()
        owner = not who or set("ua") & set(who)
        if owner and ((op == "-" and set("rx") & set(perms)) or (op == "=" and "r" not in perms)):
            return True
    return False


def _recursive(cmd: Cmd) -> bool:
    return "R" in short_flags(cmd.args) or has_long(cmd.args, "recursive")


def _world_writable_chmod(cmd: Cmd) -> bool:
    mode = _chmod_mode(cmd) if cmd.name == "chmod" else None
    return mode is not None and _world_writable(mode)


def _chmod_lockout(cmd: Cmd) -> bool:
    if cmd.name != "chmod":
        return False
    mode = _chmod_mode(cmd)
    if mode is None or not _locks_owner_out(mode):
        return False
    targets = [o for o in operands(cmd.args) if o != mode]
    return _recursive(cmd) or any(is_hardline_delete_target(t) for t in targets)


def _recursive_chmod_system(cmd: Cmd) -> bool:
    if cmd.name != "chmod" or not _recursive(cmd):
        return False
    return any(is_system_path(o) or is_hardline_delete_target(o) for o in operands(cmd.args)[1:])


def _recursive_chown_root(cmd: Cmd) -> bool:
    if cmd.name not in ("chown", "chgrp") or not _recursive(cmd):
        return False
    ops = operands(cmd.args)
    if not ops:
        return False
    owner = ops[0].lower()
    rootish = (
        owner not in ("", ":")
        and re.match(r"^(?:root|0)?(?:[:.](?:root|wheel|0))?$", owner) is not None
    )
    return rootish or any(is_system_path(o) or is_hardline_delete_target(o) for o in ops[1:])


def _move_system_dir(cmd: Cmd) -> bool:
    return any(is_hardline_delete_target(p) or is_system_path(p) for p in moved_away(cmd))


def _rsync_delete(cmd: Cmd) -> bool:
    if cmd.name != "rsync":
        return False
    longs = long_flags(cmd.args)
    if not any(f.startswith("del") or f == "remove-source-files" for f in longs):
        return False
    ops = operands(cmd.args, frozenset("efT"))
    return not (len(ops) >= 2 and is_scratch(ops[-1]))


def _archive_remove_files(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name in ("tar", "bsdtar", "gtar"):
        return "remove-files" in long_flags(args)
    if name == "zip":
        return "m" in short_flags(args) or has_long(args, "move")
    if name in ("7z", "7za", "7zz"):
        return any(a.lower() == "-sdel" for a in args)
    return name == "rar" and args[:1] == ["m"]


DAMAGE_PATTERNS: list[Pattern] = [
    Pattern("file_truncate", _truncate, "truncate a file to nothing (> f, truncate -s 0)"),
    Pattern(
        "file_shred",
        _shred,
        "shred files (unrecoverable overwrite)",
        names=frozenset({"shred", "srm", "wipe", "scrub"}),
    ),
    Pattern("dd_overwrite", _dd_overwrite, "overwrite a file with dd of=", names=frozenset({"dd"})),
    Pattern("raw_device_read", _raw_device_read, "read a raw disk or memory device"),
    Pattern(
        "world_writable_chmod",
        _world_writable_chmod,
        "make files world-writable (chmod 777/o+w)",
        names=_CHMOD,
    ),
    Pattern(
        "chmod_lockout",
        _chmod_lockout,
        "remove the owner's access recursively (chmod -R 000)",
        names=_CHMOD,
    ),
    Pattern(
        "recursive_chmod_system",
        _recursive_chmod_system,
        "recursive chmod of a system directory",
        names=_CHMOD,
    ),
    Pattern(
        "recursive_chown_root",
        _recursive_chown_root,
        "recursive chown to root or of a system directory",
        names=frozenset({"chown", "chgrp"}),
    ),
    Pattern(
        "move_system_dir",
        _move_system_dir,
        "move a system or home directory away",
        names=frozenset({"mv"}),
    ),
    Pattern(
        "rsync_delete",
        _rsync_delete,
        "rsync that deletes files (--delete)",
        names=frozenset({"rsync"}),
    ),
    Pattern(
        "archive_remove_files",
        _archive_remove_files,
        "archive and delete the originals",
        names=frozenset({"tar", "bsdtar", "gtar", "zip", "7z", "7za", "7zz", "rar"}),
    ),
]
