"""Deleting files: recursive deletes, globbed deletes, ``unlink``, ``find -delete``, ``xargs rm``.

Same contract as :mod:`registry.approval.rules`. Deleting scratch
(:mod:`.scratch`: ``node_modules``, ``build/``, ``/tmp/x``, ``~/.cache/pip``,
``find . -name '*.pyc' -delete``) needs no approval; everything else that
deletes more than one named file does. Deleting a single named file
(``rm notes.txt``) is everyday work and needs none.
"""

from __future__ import annotations

import re

from registry.approval.rules.base import Pattern, recursive_flag
from registry.approval.rules.paths import is_hardline_delete_target, is_system_path
from registry.approval.rules.scratch import is_artifact_pattern, is_scratch, is_temp_path
from registry.approval.shell.args import long_flags, operands
from registry.approval.shell.dataflow import inline_code
from registry.approval.shell.resolve import Cmd, find_exec_commands, resolve_names, xargs_command

__all__ = ["DELETE_PATTERNS", "find_starts", "windows_recursive"]

WIN_DELETE = frozenset({"del", "erase", "rd", "rmdir", "remove-item", "ri"})
RM_NAMES = frozenset({"rm", "shred", "unlink", "rmdir", "srm", "trash", "trash-put", "gio"})
_GLOB_CHARS = frozenset("*?[")
_CODE_RMTREE_RE = re.compile(
    r"\brmtree\s*\(|\brm_rf\b|\brm_r\b|\bremove_tree\s*\(|\brmSync\s*\([^)]*recursive"
    r"|\brimraf\b|\brmdirSync\s*\([^)]*recursive|\bfs\.rm\s*\([^)]*recursive|\bremovedirs\s*\("
    r"|\bdeleteRecursively\b|\bRemoveAll\s*\("
)
_CODE_TARGET_RE = re.compile(
    r"(?:rmtree|rm_rf|rm_r|remove_tree|rmSync|rimraf|rmdirSync|fs\.rm|removedirs|RemoveAll)"
    r"\s*\(?\s*(?:[rRbBuU]?)(['\"])([^'\"]*)\1"
)
_FIND_NAME_PREDICATES = frozenset({"-name", "-iname", "-path", "-ipath", "-wholename"})
_FIND_OPAQUE_PREDICATES = frozenset({"-regex", "-iregex", "-lname", "-ilname", "-inum"})


def windows_recursive(cmd: Cmd) -> bool:
    """``/s`` or ``-Recurse`` (any abbreviation) among a Windows delete's arguments."""
    return any(
        a.lower() == "/s"
        or (a.startswith("-") and len(a) >= 2 and "recurse".startswith(a[1:].lower()))
        for a in cmd.args
    )


def _windows_targets(cmd: Cmd) -> list[str]:
    raws = [r.strip("'\"").replace("\\", "/") for r in cmd.raw[1:]]
    return [r for r in raws if r and not r.startswith(("/", "-"))]


def _all_scratch(cmd: Cmd, targets: list[str]) -> bool:
    """Every target is scratch and fully known (an unknown one could be anything)."""
    if not targets or "no-preserve-root" in long_flags(cmd.args):
        return False
    known = {a for i, a in enumerate(cmd.args) if not cmd.arg_unknown(i)}
    return all(t in known and is_scratch(t) for t in targets)


def _code_deletes(cmd: Cmd) -> bool:
    code = inline_code(cmd)
    if code is None or not _CODE_RMTREE_RE.search(code):
        return False
    targets = [m.group(2) for m in _CODE_TARGET_RE.finditer(code)]
    calls = len(_CODE_RMTREE_RE.findall(code))
    return not (targets and len(targets) >= calls and all(is_scratch(t) for t in targets))


def _recursive_delete(cmd: Cmd) -> bool:
    if cmd.name == "rm" and recursive_flag(cmd):
        return not _all_scratch(cmd, operands(cmd.args))
    if cmd.name in WIN_DELETE and windows_recursive(cmd):
        targets = _windows_targets(cmd)
        return not (targets and all(is_scratch(t) for t in targets))
    return _code_deletes(cmd)


def _any_recursive_delete(cmd: Cmd) -> bool:
    if cmd.name == "rm":
        return recursive_flag(cmd)
    if cmd.name in WIN_DELETE:
        return windows_recursive(cmd)
    code = inline_code(cmd)
    return code is not None and bool(_CODE_RMTREE_RE.search(code))


def _system_path_delete(cmd: Cmd) -> bool:
    if cmd.name not in RM_NAMES:
        return False
    return any(is_system_path(o) or is_hardline_delete_target(o) for o in operands(cmd.args))


def _globs(cmd: Cmd) -> list[str]:
    if cmd.name not in ("rm", "shred", "srm"):
        return []
    return [o for o in operands(cmd.args) if any(c in _GLOB_CHARS for c in o)]


def _glob_delete(cmd: Cmd) -> bool:
    return any(not (is_scratch(o) or is_artifact_pattern(o)) for o in _globs(cmd))


def _unlink(cmd: Cmd) -> bool:
    return cmd.name == "unlink" and not all(is_temp_path(o) for o in operands(cmd.args))


def find_starts(cmd: Cmd) -> list[str]:
    """``find`` start paths: arguments before the first expression token."""
    starts: list[str] = []
    for a in cmd.args:
        if a.startswith(("-", "(", "!", "\\(")) and a not in ("-", "--"):
            break
        starts.append(a)
    return starts


def _find_restricted(cmd: Cmd) -> bool:
    """True when a ``find`` can only reach scratch: start paths or name predicates."""
    starts = find_starts(cmd)
    if starts and all(is_scratch(s) for s in starts):
        return True
    names = [cmd.args[i + 1] for i, a in enumerate(cmd.args[:-1]) if a in _FIND_NAME_PREDICATES]
    if any(a in _FIND_OPAQUE_PREDICATES for a in cmd.args):
        return False
    return bool(names) and all(is_artifact_pattern(n) for n in names)


def _any_find_delete(cmd: Cmd) -> bool:
    return cmd.name == "find" and "-delete" in cmd.args


def _find_delete(cmd: Cmd) -> bool:
    return _any_find_delete(cmd) and not _find_restricted(cmd)


def _any_find_exec_rm(cmd: Cmd) -> bool:
    return cmd.name == "find" and any(resolve_names(c) in RM_NAMES for c in find_exec_commands(cmd))


def _find_exec_rm(cmd: Cmd) -> bool:
    return _any_find_exec_rm(cmd) and not _find_restricted(cmd)


def _any_xargs_rm(cmd: Cmd) -> bool:
    return cmd.name == "xargs" and resolve_names(xargs_command(cmd)) in RM_NAMES


def _xargs_rm(cmd: Cmd) -> bool:
    if not _any_xargs_rm(cmd):
        return False
    head = cmd.pipeline[0] if cmd.index > 0 else None
    return not (head is not None and head.name == "find" and _find_restricted(head))


DELETE_PATTERNS: list[Pattern] = [
    Pattern(
        "system_path_delete",
        _system_path_delete,
        "delete files in a system directory",
        names=RM_NAMES,
    ),
    Pattern("recursive_delete", _recursive_delete, "recursive delete", _any_recursive_delete),
    Pattern(
        "glob_delete",
        _glob_delete,
        "delete every file a glob matches (rm src/*)",
        lambda cmd: bool(_globs(cmd)),
        frozenset({"rm", "shred", "srm"}),
    ),
    Pattern("file_unlink", _unlink, "delete a file with unlink", names=frozenset({"unlink"})),
    Pattern(
        "xargs_rm",
        _xargs_rm,
        "delete files listed on stdin (xargs rm)",
        _any_xargs_rm,
        frozenset({"xargs"}),
    ),
    Pattern(
        "find_exec_rm",
        _find_exec_rm,
        "delete files found by find (-exec rm)",
        _any_find_exec_rm,
        frozenset({"find"}),
    ),
    Pattern(
        "find_delete",
        _find_delete,
        "delete files found by find (-delete)",
        _any_find_delete,
        frozenset({"find"}),
    ),
]
