"""The hardline: commands that never run, in any backend, mode or allowlist.

Contract: each entry of :data:`HARDLINE_PATTERNS` is ``(key, match, description)``
where ``match`` takes one effective :class:`~registry.approval.commands.Cmd`.
:func:`is_fork_bomb_text` works on a whole script's operator/word text because a
fork bomb spans several simple commands. Hardline matches are also reported by
``detect_dangerous_command`` (a hardline command is dangerous too).

The list is short on purpose: only commands with no legitimate use inside an
agent's sandbox that could not be expressed in a safer way.
"""

from __future__ import annotations

import re

from registry.approval.commands import (
    Cmd,
    Pattern,
    has_long,
    long_flags,
    operands,
    short_flags,
    subcommand,
    word_set,
)
from registry.approval.paths import is_block_device, is_hardline_delete_target

__all__ = [
    "FORK_BOMB",
    "HARDLINE_PATTERNS",
    "is_fork_bomb_code",
    "is_fork_bomb_text",
    "writes_block_device",
]

_WIN_DELETE = frozenset({"del", "erase", "rd", "rmdir", "remove-item", "ri"})
_MKFS_NAMES = word_set(
    """
    mke2fs mkdosfs mkntfs mkexfatfs mkswap wipefs newfs newfs_msdos format-volume clear-disk
    initialize-disk mkudffs mkreiserfs mkhfs
    """
)
_DISKUTIL_ERASE = word_set(
    """
    erasedisk erasevolume zerodisk randomdisk secureerase partitiondisk reformat
    """
)
_DEVICE_WRITERS = word_set(
    """
    tee shred blkdiscard ddrescue cp mv install pv sg_format badblocks
    """
)
_SHUTDOWN_NAMES = word_set(
    """
    shutdown reboot poweroff halt stop-computer restart-computer openrc-shutdown kexec
    """
)
_SYSTEMCTL_SHORT = frozenset("tpHMnos")
_SYSTEMCTL_LONG = word_set(
    """
    type property host machine lines output signal state root kill-whom job-mode what when
    message boot-loader-entry reboot-argument
    """
)
_SYSTEMCTL_POWER = frozenset({"poweroff", "reboot", "halt", "kexec", "soft-reboot"})
_POWER_TARGETS = re.compile(r"^(?:poweroff|reboot|halt|kexec|shutdown|soft-reboot)(?:\.target)?$")
_DRIVE_RE = re.compile(r"^[A-Za-z]:[\\/]?$")
# Matches on the operator/word text of a script: name(){ name|name& } and the
# "function name { ... }" spelling; also the "name& name" body variant.
_NAME = r"[^\s;&|(){}<>]+"
_BODY = r"\s*[{(]\s*(?:(?P=f)\s*\|&?\s*(?P=f)\s*&|(?P=f)\s*&\s*;?\s*(?P=f)(?![^\s;&|(){}<>]))"
_FORK_BOMB_RES = (
    re.compile(rf"(?P<f>{_NAME})\s*\(\s*\){_BODY}"),
    re.compile(rf"function\s+(?P<f>{_NAME})\s*(?:\(\s*\))?{_BODY}"),
)
_CODE_FORK_BOMB_RE = re.compile(
    r"fork\s*(?:\(\s*\))?\s*while\s*fork|while\s*(?:\(?\s*(?:1|true|True)\s*\)?)\s*[:{]?\s*(?:os\.|posix\.)?fork\s*\(",
)


def _recursive_rm(cmd: Cmd) -> bool:
    flags = short_flags(cmd.args)
    return "r" in flags or "R" in flags or has_long(cmd.args, "recursive")


def _targets(cmd: Cmd) -> list[str]:
    """Operand texts plus their raw spellings (raw keeps Windows backslashes)."""
    ops = operands(cmd.args)
    raw_ops = [r.strip("'\"") for a, r in zip(cmd.args, cmd.raw[1:], strict=False) if a in ops]
    return ops + raw_ops


def _find_starts(cmd: Cmd) -> list[str]:
    """``find`` start paths: arguments before the first expression token."""
    starts: list[str] = []
    for a in cmd.args:
        if a.startswith(("-", "(", "!", "\\(")) and a not in ("-", "--"):
            break
        starts.append(a)
    return starts


def _root_delete(cmd: Cmd) -> bool:
    if cmd.name == "rm":
        if "no-preserve-root" in long_flags(cmd.args):
            return True
        return _recursive_rm(cmd) and any(is_hardline_delete_target(t) for t in _targets(cmd))
    if cmd.name == "find":
        destructive = "-delete" in cmd.args or any(
            a in ("-exec", "-execdir", "-ok", "-okdir")
            and i + 1 < len(cmd.args)
            and cmd.args[i + 1].rsplit("/", 1)[-1] in ("rm", "shred", "unlink")
            for i, a in enumerate(cmd.args)
        )
        return destructive and any(is_hardline_delete_target(s) for s in _find_starts(cmd))
    if cmd.name in _WIN_DELETE:
        recursive = any(
            a.lower() == "/s"
            or (a.startswith("-") and len(a) >= 2 and "recurse".startswith(a[1:].lower()))
            for a in cmd.args
        )
        if recursive:
            # Raw spellings keep the backslashes of C:\ paths that quote removal ate.
            raw_targets = [r.strip("'\"") for r in cmd.raw[1:] if not r.startswith(("/", "-"))]
            return any(is_hardline_delete_target(t) for t in raw_targets + operands(cmd.args))
    return False


def _mkfs(cmd: Cmd) -> bool:
    name = cmd.name
    if name.startswith("mkfs") or name in _MKFS_NAMES:
        return True
    if name == "format":
        return any(_DRIVE_RE.match(r.strip("'\"")) for r in cmd.raw[1:])
    if name == "diskutil":
        return bool(cmd.args) and cmd.args[0].lower() in _DISKUTIL_ERASE
    return False


def writes_block_device(cmd: Cmd) -> bool:
    """True if ``cmd`` writes to a raw block device by any route we model."""
    if any(r.writes and is_block_device(r.target.text) for r in cmd.redirects):
        return True
    if cmd.name == "dd":
        return any(a.startswith("of=") and is_block_device(a[3:]) for a in cmd.args)
    if cmd.name in _DEVICE_WRITERS:
        ops = operands(cmd.args, frozenset("stnoSaT") if cmd.name != "tee" else frozenset())
        if cmd.name in ("cp", "mv", "install", "ddrescue"):
            return bool(ops) and is_block_device(ops[-1])
        return any(is_block_device(o) for o in ops)
    return False


def _kill_all(cmd: Cmd) -> bool:
    if cmd.name != "kill":
        return False
    args = cmd.args
    if args == ["-1"]:
        return True  # ambiguous spelling: treat "-1" as the pid (every process)
    i = 0
    if args and args[0] in ("-s", "-n", "--signal"):
        i = 2
    elif (
        args
        and args[0].startswith("-")
        and args[0] not in ("--", "-1")
        and args[0] not in ("-l", "-L")
    ):
        i = 1
    elif args and args[0] == "-1":
        i = 1  # "kill -1 <pid>": signal 1 (HUP) to the pids that follow
    pids = [a for a in args[i:] if a != "--"]
    return "-1" in pids


def _shutdown(cmd: Cmd) -> bool:
    name = cmd.name
    if name in _SHUTDOWN_NAMES:
        return not (name == "shutdown" and ("-c" in cmd.args or "--help" in cmd.args))
    if name in ("init", "telinit"):
        return any(a in ("0", "6") for a in cmd.args)
    if name == "systemctl":
        idx, verb = subcommand(cmd.args, _SYSTEMCTL_SHORT, _SYSTEMCTL_LONG)
        if verb in _SYSTEMCTL_POWER:
            return True
        if verb in ("start", "isolate") and idx >= 0:
            return any(_POWER_TARGETS.match(a) for a in cmd.args[idx + 1 :])
        return False
    if name == "loginctl":
        return any(a in ("poweroff", "reboot", "halt") for a in cmd.args)
    # "echo b > /proc/sysrq-trigger" reboots, "o" powers off.
    return any(
        r.writes and r.target.text.rstrip("/") == "/proc/sysrq-trigger" for r in cmd.redirects
    )


def is_fork_bomb_text(code: str) -> bool:
    """True if ``code`` (a script's word/operator text) defines a fork bomb."""
    return ("(" in code or "function" in code) and any(r.search(code) for r in _FORK_BOMB_RES)


def is_fork_bomb_code(code: str) -> bool:
    """True for interpreter fork loops (``perl -e 'fork while fork'``)."""
    return "fork" in code and bool(_CODE_FORK_BOMB_RE.search(code))


HARDLINE_PATTERNS: list[Pattern] = [
    Pattern(
        "delete_root", _root_delete, "recursive delete of /, a system directory or a home directory"
    ),
    Pattern("format_filesystem", _mkfs, "format a filesystem or wipe a disk (mkfs)"),
    Pattern("block_device_write", writes_block_device, "write to a raw block device"),
    Pattern("kill_all_processes", _kill_all, "kill every process (kill -1)"),
    Pattern("shutdown", _shutdown, "shut down, halt or reboot the machine"),
]

FORK_BOMB = ("fork_bomb", "fork bomb")
