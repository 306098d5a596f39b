"""The hardline: commands that never run, in any backend, mode or allowlist.

Contract: each entry of :data:`HARDLINE_PATTERNS` is ``(key, match,
description)`` over one effective :class:`~registry.approval.shell.resolve.Cmd`.
Fork bombs, which span several commands, are in :mod:`.forkbomb`. Hardline
matches are also reported by ``detect_dangerous_command`` (a hardline command
is dangerous too).

The list is short on purpose: only commands with no legitimate use inside an
agent's sandbox. Targets count as they will be when the command runs: relative
to a directory the command ``cd``-ed into (``cd / && rm -rf *``), through the
session's home directory, brace and glob expansions (``rm -rf {/etc,/usr}``,
``rm -rf /e*``), and through a program name that cannot be resolved
(``$X -rf /``).
"""

from __future__ import annotations

import posixpath
import re

from registry.approval.rules.base import Pattern, recursive_flag
from registry.approval.rules.files_delete import WIN_DELETE, find_starts, windows_recursive
from registry.approval.rules.paths import is_block_device, is_hardline_delete_target
from registry.approval.shell.args import long_flags, operands, short_flags, subcommand, word_set
from registry.approval.shell.dataflow import inline_code
from registry.approval.shell.resolve import Cmd

__all__ = ["HARDLINE_PATTERNS", "hardline_target", "writes_block_device"]

_MKFS_NAMES = word_set(
    """
    mke2fs mkdosfs mkntfs mkexfatfs mkswap newfs newfs_msdos format-volume clear-disk
    initialize-disk mkudffs mkreiserfs mkhfs mkfs wipefs
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
_PARTITION_TOOLS = word_set(
    """
    wipefs blkdiscard sgdisk gdisk parted sfdisk hdparm nvme cryptsetup mdadm zpool dmsetup
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
_CODE_KILL_ALL_RE = re.compile(
    r"\bkill(?:pg)?\s*\(\s*-1\s*,|\bkill\s*\(?\s*['\"]?-?\w+['\"]?\s*,\s*-1\b"
    r"|Process\.kill\s*\(\s*[:'\"]?\w+['\"]?\s*,\s*-1\b|process\.kill\s*\(\s*-1\b"
)
_CODE_RMTREE_TARGET_RE = re.compile(
    r"(?:rmtree|rm_rf|rm_r|remove_tree|rmSync|rimraf|RemoveAll)\s*\(?\s*[rRbBuU]?(['\"])([^'\"]*)\1"
)


def hardline_target(cmd: Cmd, path: str) -> bool:
    """``path`` is ``/``, a system directory or a home directory, as ``cmd`` will see it."""
    if not path:
        return False
    if is_hardline_delete_target(path):
        return True
    relative = cmd.cwd and not path.startswith(("/", "~", "$"))
    if relative and is_hardline_delete_target(posixpath.join(str(cmd.cwd), path)):
        return True
    home = cmd.ctx.home
    if home and home != "/" and path.startswith("/"):
        stripped = re.sub(r"(?:/+(?:\.|[.*?\[\]!^]*[*?][.*?\[\]!^]*)?)+$", "", path) or "/"
        norm = posixpath.normpath(stripped)
        return norm == home.rstrip("/") or home.startswith(norm.rstrip("/") + "/")
    return False


def _targets(cmd: Cmd) -> list[str]:
    """Operand texts plus their raw spellings (raw keeps Windows backslashes)."""
    ops = operands(cmd.args)
    raw_ops = [r.strip("'\"") for a, r in zip(cmd.args, cmd.raw[1:], strict=False) if a in ops]
    return ops + raw_ops


def _root_delete(cmd: Cmd) -> bool:
    name = cmd.name
    if name == "rm":
        if "no-preserve-root" in long_flags(cmd.args):
            return True
        return recursive_flag(cmd) and any(hardline_target(cmd, t) for t in _targets(cmd))
    if name == "find":
        destructive = "-delete" in cmd.args or any(
            a in ("-exec", "-execdir", "-ok", "-okdir")
            and i + 1 < len(cmd.args)
            and cmd.args[i + 1].rsplit("/", 1)[-1] in ("rm", "shred", "unlink")
            for i, a in enumerate(cmd.args)
        )
        return destructive and any(hardline_target(cmd, s) for s in find_starts(cmd))
    if name == "rsync" and any(f.startswith("del") for f in long_flags(cmd.args)):
        ops = operands(cmd.args, frozenset("efT"))
        return len(ops) >= 2 and hardline_target(cmd, ops[-1])
    if name in WIN_DELETE and windows_recursive(cmd):
        raw_targets = [r.strip("'\"") for r in cmd.raw[1:] if not r.startswith(("/", "-"))]
        return any(hardline_target(cmd, t) for t in raw_targets + operands(cmd.args))
    code = inline_code(cmd)
    if code and "(" in code:
        return any(hardline_target(cmd, m.group(2)) for m in _CODE_RMTREE_TARGET_RE.finditer(code))
    return False


def _dynamic_root_target(cmd: Cmd) -> bool:
    """A program that cannot be resolved, run with recursive options on a hardline target."""
    if not cmd.dynamic:
        return False
    flags = short_flags(cmd.args)
    recursive = bool({"r", "R"} & flags) or bool(
        {"recursive", "no-preserve-root", "delete"} & long_flags(cmd.args)
    )
    return recursive and any(hardline_target(cmd, t) for t in operands(cmd.args))


def _mkfs(cmd: Cmd) -> bool:
    name = cmd.name
    if name.startswith("mkfs") or name in _MKFS_NAMES:
        return True
    if name == "format":
        return any(_DRIVE_RE.match(r.strip("'\"")) for r in cmd.raw[1:])
    if name == "diskutil":
        return bool(cmd.args) and cmd.args[0].lower() in _DISKUTIL_ERASE
    return False


def _wipe_partition_table(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    flags = short_flags(args)
    longs = long_flags(args)
    if name in ("wipefs", "blkdiscard"):
        return True
    if name in ("sgdisk", "gdisk"):
        return bool({"Z", "z", "o"} & flags) or bool({"zap-all", "zap", "clear"} & longs)
    if name == "parted":
        return any(a.lower() in ("mklabel", "mktable", "rm") for a in args)
    if name == "sfdisk":
        return bool({"delete", "wipe"} & longs) or "d" in flags
    if name in ("hdparm",):
        return any(a.startswith("--security-erase") or a == "--trim-sector-ranges" for a in args)
    if name == "nvme":
        return subcommand(args)[1] in ("format", "sanitize")
    if name == "cryptsetup":
        return subcommand(args)[1] in ("luksformat", "erase", "luksErase".lower())
    if name == "mdadm":
        return "zero-superblock" in longs
    if name == "zpool":
        return subcommand(args)[1] in ("destroy", "labelclear")
    return name == "dmsetup" and subcommand(args)[1] in ("remove_all", "wipe_table")


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
        code = inline_code(cmd)
        return code is not None and "-1" in code and bool(_CODE_KILL_ALL_RE.search(code))
    args = cmd.args
    if args == ["-1"]:
        return True  # ambiguous spelling: treat "-1" as the pid (every process)
    i = 0
    if args and args[0] in ("-s", "-n", "--signal"):
        i = 2
    elif args and args[0].startswith("-") and args[0] not in ("--", "-1", "-l", "-L"):
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


HARDLINE_PATTERNS: list[Pattern] = [
    Pattern(
        "delete_root", _root_delete, "recursive delete of /, a system directory or a home directory"
    ),
    Pattern(
        "dynamic_root_target",
        _dynamic_root_target,
        "a program that cannot be resolved, run recursively on / or a system or home directory",
    ),
    Pattern("format_filesystem", _mkfs, "format a filesystem or wipe a disk (mkfs)"),
    Pattern(
        "wipe_partition_table",
        _wipe_partition_table,
        "wipe a partition table or a disk's signatures (sgdisk --zap-all, wipefs, blkdiscard)",
        names=_PARTITION_TOOLS,
    ),
    Pattern("block_device_write", writes_block_device, "write to a raw block device"),
    Pattern("kill_all_processes", _kill_all, "kill every process (kill -1)"),
    Pattern("shutdown", _shutdown, "shut down, halt or reboot the machine"),
]
