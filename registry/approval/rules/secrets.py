"""Overwriting configuration and secrets, by any means; feeding a password to sudo.

Same contract as :mod:`registry.approval.rules`. A write is a redirection,
``tee``, ``dd of=``, ``cp``/``mv``/``install``/``rsync`` onto the file (not with
``-n``), ``ln -sf``, ``sed -i``/``perl -i``/``ruby -i``, ``truncate``, or
moving the file away. Covered: system configuration and login files
(``/etc``, shell rc files, ``~/.ssh/*``), project files holding secrets
(``.env*``, ``.netrc``, ``.npmrc``, ``.git/config``, ``.git/hooks/*`` ...) and
the paths the worker protects (``ApprovalSettings.protected_paths``: its
``SBX_HOME`` and ``config.yaml``), where deleting counts too. Appending a line
to a shell rc file or ``.env`` (PATH setup) stays ordinary work.
"""

from __future__ import annotations

import posixpath
import re

from registry.approval.rules.base import Pattern
from registry.approval.rules.files_delete import RM_NAMES
from registry.approval.rules.paths import is_project_config, is_system_config
from registry.approval.shell.args import operands, short_flags
from registry.approval.shell.dataflow import moved_away, write_targets
from registry.approval.shell.resolve import Cmd

__all__ = ["SECRET_PATTERNS"]

_RC_RE = re.compile(
    r"(?:^|/)\.(?:bashrc|bash_profile|bash_login|bash_aliases|profile|zshrc|zprofile|zshenv"
    r"|zlogin|cshrc|tcshrc|kshrc|inputrc)$"
)
_HOME_PREFIX_RE = re.compile(r"^(?:~|\$HOME|\$\{HOME\})(?=/|$)")
_HOMEDIR_RE = re.compile(r"^/(?:home/[^/]+|root|Users/[^/]+)(?=/|$)")
_PASSWORD_FEED_OPS = frozenset({"<<<", "<<", "<<-", "<"})


def _system_config_overwrite(cmd: Cmd) -> bool:
    for path, truncates in write_targets(cmd, include_copies=True):
        # Appending to a shell rc file is routine (PATH setup); replacing it is not.
        if is_system_config(path) and (truncates or not _RC_RE.search(path)):
            return True
    return any(is_system_config(p) for p in moved_away(cmd))


def _project_config_overwrite(cmd: Cmd) -> bool:
    if any(t and is_project_config(p) for p, t in write_targets(cmd, include_copies=True)):
        return True
    return any(is_project_config(p) for p in moved_away(cmd))


_GENERIC_CONFIG_RE = re.compile(
    r"(?:^|/)(?:config|settings|application|appsettings)(?:\.[\w-]+)?\.(?:ya?ml|json|toml|ini|cfg"
    r"|conf|properties)$"
)


def _generic_config_write(cmd: Cmd) -> bool:
    targets = write_targets(cmd, include_copies=True)
    return any(t and _GENERIC_CONFIG_RE.search(p) for p, t in targets)


def _home_relative(path: str, home: str | None) -> str | None:
    """``path`` spelled from the home directory (``~/x``), when it is under one."""
    m = _HOME_PREFIX_RE.match(path)
    if m:
        return "~" + path[m.end() :]
    if home and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home.rstrip("/")) :]
    m = _HOMEDIR_RE.match(path)
    return "~" + path[m.end() :] if m else None


def _forms(path: str, cmd: Cmd) -> set[str]:
    if not path.startswith(("/", "~", "$")) and cmd.cwd:
        path = posixpath.join(cmd.cwd, path)
    path = posixpath.normpath(path) if path.startswith(("/", "~")) else path
    forms = {path.rstrip("/") or "/"}
    rel = _home_relative(path, cmd.ctx.home)
    if rel is not None:
        forms.add(rel.rstrip("/") or "~")
    return forms


def _touches_protected(cmd: Cmd, path: str, deletes: bool) -> bool:
    """``path`` is a protected path or inside one (or, for a delete, contains one)."""
    targets = _forms(path, cmd)
    for protected in cmd.ctx.protected:
        for p in _forms(protected, cmd):
            for t in targets:
                if t == p or t.startswith(p + "/") or (deletes and p.startswith(t + "/")):
                    return True
    return False


def _protected_path_write(cmd: Cmd) -> bool:
    if not cmd.ctx.protected:
        return False
    paths = [p for p, _ in write_targets(cmd, include_copies=True)] + moved_away(cmd)
    if any(_touches_protected(cmd, p, deletes=False) for p in paths):
        return True
    if cmd.name in RM_NAMES or cmd.name in ("chmod", "chown", "find"):
        return any(_touches_protected(cmd, o, deletes=True) for o in operands(cmd.args))
    return False


def _sudo_stdin_password(cmd: Cmd) -> bool:
    if not ({"sudo", "doas"} & set(cmd.wrappers)):
        return False
    opts = [a for a in cmd.wrapper_args if a.startswith("-")]
    reads_stdin = "--stdin" in opts or "S" in short_flags(opts)
    fed = cmd.index > 0 or any(r.op in _PASSWORD_FEED_OPS for r in cmd.redirects)
    return reads_stdin and fed


SECRET_PATTERNS: list[Pattern] = [
    Pattern(
        "protected_path_write",
        _protected_path_write,
        "write to or delete the worker's own files (SBX_HOME, config.yaml)",
    ),
    Pattern(
        "system_config_overwrite",
        _system_config_overwrite,
        "overwrite system configuration or login files",
    ),
    Pattern(
        "project_config_overwrite",
        _project_config_overwrite,
        "overwrite a file holding secrets (.env, .netrc, .npmrc, .git/config)",
        _generic_config_write,
    ),
    Pattern(
        "sudo_stdin_password",
        _sudo_stdin_password,
        "feed a password to sudo on stdin (sudo -S)",
    ),
]
