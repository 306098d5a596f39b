"""Dangerous (approval-required) command patterns.

Contract: :data:`DANGEROUS_PATTERNS` is an ordered list of ``(key, match,
description)``; ``match`` takes one effective command
(:class:`~registry.approval.commands.Cmd`, wrappers such as ``sudo`` already
removed, its pipeline attached). Keys are stable identifiers that users put in
``command_allowlist``/``command_denylist`` and approve per session; never rename
one. Earlier entries are more specific and are reported first.

This module holds the file-level families (deletes, permissions, SQL,
overwrites) and assembles the full list with
:data:`~registry.approval.patterns_exec.EXEC_PATTERNS` and
:data:`~registry.approval.patterns_system.SYSTEM_PATTERNS`.
"""

from __future__ import annotations

import re

from registry.approval.commands import Cmd, Pattern, has_long, operands, short_flags, word_set
from registry.approval.dataflow import inline_code, stdin_text, write_targets
from registry.approval.paths import (
    is_hardline_delete_target,
    is_project_config,
    is_system_config,
    is_system_path,
)
from registry.approval.patterns_exec import EXEC_PATTERNS
from registry.approval.patterns_system import SYSTEM_PATTERNS

__all__ = ["DANGEROUS_PATTERNS", "PATTERN_KEYS"]

_WIN_DELETE = frozenset({"del", "erase", "rd", "rmdir", "remove-item", "ri"})
_OCTAL_RE = re.compile(r"^[0-7]{1,5}$")
_SYMBOLIC_RE = re.compile(r"^[ugoa]*[-+=][rwxXstugo]*$")
_SQL_CLIENTS = word_set(
    """
    psql mysql mariadb sqlite3 sqlite sqlcmd clickhouse-client clickhouse duckdb pgcli mycli
    litecli usql isql snowsql bq cqlsh cockroach mongo mongosh trino presto beeline impala-shell
    sqlplus db2 osql mysqlsh vsql hive spark-sql
    """
)
_SQL_DROP_RE = re.compile(
    r"\bdrop\s+(?:table|database|schema|view|index|user|role|function|procedure|trigger|sequence"
    r"|materialized\s+view|keyspace|tablespace|collection|owned|extension|type|domain)\b"
    r"|\.drop(?:Database|Collection)?\s*\(",
    re.IGNORECASE,
)
_SQL_TRUNCATE_RE = re.compile(r"\btruncate\s+(?:table\s+)?(?:only\s+)?[\w.\"`\[]", re.IGNORECASE)
_SQL_DELETE_RE = re.compile(r"\bdelete\s+from\s+\S+", re.IGNORECASE)
_SQL_WHERE_RE = re.compile(r"\bwhere\b", re.IGNORECASE)
_MONGO_DELETE_RE = re.compile(r"\.(?:deleteMany|remove)\s*\(\s*(?:\{\s*\})?\s*\)")
_CODE_RMTREE_RE = re.compile(
    r"\brmtree\s*\(|\brm_rf\b|\bremove_tree\s*\(|\brmSync\s*\([^)]*recursive|\brimraf\b"
)


# -- deletes -----------------------------------------------------------------
def _rm_recursive(cmd: Cmd) -> bool:
    flags = short_flags(cmd.args)
    return "r" in flags or "R" in flags or has_long(cmd.args, "recursive")


def _win_recursive(cmd: Cmd) -> bool:
    return any(
        a.lower() == "/s"
        or (a.startswith("-") and len(a) >= 2 and "recurse".startswith(a[1:].lower()))
        for a in cmd.args
    )


def _recursive_delete(cmd: Cmd) -> bool:
    if cmd.name == "rm":
        return _rm_recursive(cmd)
    if cmd.name in _WIN_DELETE:
        return _win_recursive(cmd)
    code = inline_code(cmd)
    return code is not None and bool(_CODE_RMTREE_RE.search(code))


def _system_path_delete(cmd: Cmd) -> bool:
    if cmd.name not in ("rm", "unlink", "shred", "rmdir"):
        return False
    return any(is_system_path(o) or is_hardline_delete_target(o) for o in operands(cmd.args))


# -- permissions ---------------------------------------------------------------
def _chmod_mode(cmd: Cmd) -> str | None:
    for a in cmd.args:
        if a.startswith("--"):
            continue
        if (
            _OCTAL_RE.match(a)
            or (all(_SYMBOLIC_RE.match(c) for c in a.split(",")) and a[:1] != "-")
            or (
                a.startswith("-")
                and all(_SYMBOLIC_RE.match(c) for c in a.split(","))
                and a[1:2] in "rwx"
            )
        ):
            return a
    return None


def _world_writable_mode(mode: str) -> bool:
    if _OCTAL_RE.match(mode):
        return bool(int(mode[-1]) & 2)
    for clause in mode.split(","):
        m = re.match(r"^([ugoa]*)([-+=])([rwxXstugo]*)$", clause)
        if (
            m
            and m.group(2) in "+="
            and "w" in m.group(3)
            and ("o" in m.group(1) or "a" in m.group(1))
        ):
            return True
    return False


def _world_writable_chmod(cmd: Cmd) -> bool:
    if cmd.name != "chmod":
        return False
    mode = _chmod_mode(cmd)
    return mode is not None and _world_writable_mode(mode)


def _recursive(cmd: Cmd) -> bool:
    return "R" in short_flags(cmd.args) or has_long(cmd.args, "recursive")


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
    rootish = re.match(
        r"^(?:root|0)?(?:[:.](?:root|wheel|0))?$", owner
    ) is not None and owner not in ("", ":")
    return rootish or any(is_system_path(o) or is_hardline_delete_target(o) for o in ops[1:])


# -- SQL -----------------------------------------------------------------------
def _sql_texts(cmd: Cmd) -> list[str]:
    texts: list[str] = []
    if cmd.name in _SQL_CLIENTS:
        texts.append(" ".join(cmd.args))
        fed = stdin_text(cmd)
        if fed:
            texts.append(fed)
    code = inline_code(cmd)
    if code:
        texts.append(code)
    return texts


def _sql_drop(cmd: Cmd) -> bool:
    if cmd.name == "dropdb" or (
        cmd.name == "mysqladmin" and any(a.lower() == "drop" for a in cmd.args)
    ):
        return True
    return any(_SQL_DROP_RE.search(t) for t in _sql_texts(cmd))


def _sql_truncate(cmd: Cmd) -> bool:
    return any(_SQL_TRUNCATE_RE.search(t) for t in _sql_texts(cmd))


def _sql_delete_without_where(cmd: Cmd) -> bool:
    for text in _sql_texts(cmd):
        if _MONGO_DELETE_RE.search(text):
            return True
        for stmt in text.split(";"):
            if _SQL_DELETE_RE.search(stmt) and not _SQL_WHERE_RE.search(stmt):
                return True
    return False


# -- file overwrites -------------------------------------------------------------
_RC_RE = re.compile(
    r"(?:^|/)\.(?:bashrc|bash_profile|bash_login|profile|zshrc|zprofile|zshenv|zlogin|cshrc|tcshrc|kshrc|inputrc)$"
)


def _system_config_overwrite(cmd: Cmd) -> bool:
    for path, truncates in write_targets(cmd, include_copies=True):
        # Appending to a shell rc file is routine (PATH setup); replacing it is not.
        if is_system_config(path) and (truncates or not _RC_RE.search(path)):
            return True
    return False


def _project_config_overwrite(cmd: Cmd) -> bool:
    return any(t and is_project_config(p) for p, t in write_targets(cmd, include_copies=False))


# Ordered: specific before general; hardline keys live in hardline.py.
DANGEROUS_PATTERNS: list[Pattern] = [
    Pattern("system_path_delete", _system_path_delete, "delete files in a system directory"),
    Pattern("recursive_delete", _recursive_delete, "recursive delete"),
    Pattern(
        "world_writable_chmod", _world_writable_chmod, "make files world-writable (chmod 777/o+w)"
    ),
    Pattern(
        "recursive_chmod_system", _recursive_chmod_system, "recursive chmod of a system directory"
    ),
    Pattern(
        "recursive_chown_root",
        _recursive_chown_root,
        "recursive chown to root or of a system directory",
    ),
    Pattern("sql_drop", _sql_drop, "SQL DROP (tables, databases, schemas)"),
    Pattern("sql_truncate", _sql_truncate, "SQL TRUNCATE"),
    Pattern("sql_delete_without_where", _sql_delete_without_where, "SQL DELETE without WHERE"),
    Pattern(
        "system_config_overwrite",
        _system_config_overwrite,
        "overwrite system configuration or login files",
    ),
    Pattern(
        "project_config_overwrite", _project_config_overwrite, "overwrite a project env/config file"
    ),
    *EXEC_PATTERNS,
    *SYSTEM_PATTERNS,
]

PATTERN_KEYS: frozenset[str] = frozenset(p.key for p in DANGEROUS_PATTERNS)
