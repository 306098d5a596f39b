"""Version-control history and work-tree destruction (git).

Same contract as :mod:`registry.approval.rules`. Git's global options
(``-C dir``, ``-c key=value``, ``--git-dir=...``, ``--no-pager``) are skipped
to find the subcommand. Covered: hard resets, force pushes (``-f``,
``--force``, ``--force-with-lease``, ``+ref``, ``--mirror``), remote branch
deletion (``--delete``, ``:ref``), ``clean`` (unless ``-n``), branch
force-deletes, discarding the work tree (``checkout -- .``, ``restore .``,
``switch --discard-changes``), stash drops, reflog expiry and pruning,
history rewriting (``filter-branch``, ``filter-repo``, BFG), and settings that
make git run a program (``-c core.sshCommand=...``, ``git config alias.x '!...'``,
``GIT_SSH_COMMAND=...``).
"""

from __future__ import annotations

from registry.approval.rules.base import Pattern
from registry.approval.shell.args import has_long, long_flags, short_flags
from registry.approval.shell.gitargs import git_config_exec_values, git_subcommand
from registry.approval.shell.resolve import Cmd

__all__ = ["VCS_PATTERNS"]

_GIT = frozenset({"git"})
_WHOLE_TREE = frozenset({".", ":/", "*", ":(top)", ":/*", "./", "-A", "--all"})


def _reset_hard(cmd: Cmd) -> bool:
    sub, rest, _ = git_subcommand(cmd)
    return sub == "reset" and "--hard" in rest


def _force_push(cmd: Cmd) -> bool:
    sub, rest, _ = git_subcommand(cmd)
    if sub != "push":
        return False
    if "f" in short_flags(rest) or {"force", "force-with-lease", "force-if-includes", "mirror"} & (
        long_flags(rest)
    ):
        return True
    return any(a.startswith("+") and len(a) > 1 for a in rest)


def _remote_delete(cmd: Cmd) -> bool:
    sub, rest, _ = git_subcommand(cmd)
    if sub != "push":
        return False
    if "d" in short_flags(rest) or {"delete", "prune"} & long_flags(rest):
        return True
    return any(a.startswith(":") and len(a) > 1 for a in rest[1:])


def _clean(cmd: Cmd) -> bool:
    sub, rest, _ = git_subcommand(cmd)
    return sub == "clean" and not ("n" in short_flags(rest) or has_long(rest, "dry-run"))


def _branch_force_delete(cmd: Cmd) -> bool:
    sub, rest, _ = git_subcommand(cmd)
    if sub == "update-ref":
        return "-d" in rest or has_long(rest, "delete")
    if sub != "branch":
        return False
    flags = short_flags(rest)
    deletes = "d" in flags or has_long(rest, "delete")
    forced = "f" in flags or has_long(rest, "force")
    return "D" in flags or (deletes and forced)


def _discard_worktree(cmd: Cmd) -> bool:
    sub, rest, _ = git_subcommand(cmd)
    if sub == "checkout":
        if "f" in short_flags(rest) or has_long(rest, "force"):
            return True
        return any(a in _WHOLE_TREE for a in rest if a != "--")
    if sub == "restore":
        staged_only = ("S" in short_flags(rest) or has_long(rest, "staged")) and not (
            "W" in short_flags(rest) or has_long(rest, "worktree")
        )
        return not staged_only and any(a in _WHOLE_TREE for a in rest)
    if sub == "switch":
        return "f" in short_flags(rest) or bool({"discard-changes", "force"} & long_flags(rest))
    return False


def _stash_drop(cmd: Cmd) -> bool:
    sub, rest, _ = git_subcommand(cmd)
    return sub == "stash" and rest[:1] in (["drop"], ["clear"])


def _history_prune(cmd: Cmd) -> bool:
    sub, rest, _ = git_subcommand(cmd)
    if sub == "reflog":
        return rest[:1] in (["expire"], ["delete"])
    if sub == "gc":
        return any(a.startswith("--prune=") and a[8:] in ("now", "all") for a in rest)
    return sub == "prune"


def _history_rewrite(cmd: Cmd) -> bool:
    if cmd.name in ("bfg", "git-filter-repo", "git-filter-branch") or (
        cmd.name == "java" and any(a.rsplit("/", 1)[-1].startswith("bfg") for a in cmd.args)
    ):
        return True
    sub, _, _ = git_subcommand(cmd)
    return sub in ("filter-branch", "filter-repo")


def _config_exec(cmd: Cmd) -> bool:
    return bool(git_config_exec_values(cmd))


VCS_PATTERNS: list[Pattern] = [
    Pattern(
        "git_reset_hard", _reset_hard, "git reset --hard (discards uncommitted changes)", names=_GIT
    ),
    Pattern("git_force_push", _force_push, "git force push (rewrites remote history)", names=_GIT),
    Pattern(
        "git_remote_delete",
        _remote_delete,
        "delete remote branches (git push --delete)",
        names=_GIT,
    ),
    Pattern("git_clean", _clean, "git clean (deletes untracked files)", names=_GIT),
    Pattern(
        "git_branch_force_delete", _branch_force_delete, "force-delete a git branch", names=_GIT
    ),
    Pattern(
        "git_discard_worktree",
        _discard_worktree,
        "discard uncommitted changes (git checkout -- ., git restore .)",
        names=_GIT,
    ),
    Pattern("git_stash_drop", _stash_drop, "drop git stashes", names=_GIT),
    Pattern(
        "git_history_prune",
        _history_prune,
        "expire reflogs or prune unreachable commits",
        names=_GIT,
    ),
    Pattern(
        "git_history_rewrite",
        _history_rewrite,
        "rewrite git history (filter-branch)",
        names=frozenset({"git", "bfg", "java", "git-filter-repo", "git-filter-branch"}),
    ),
    Pattern(
        "git_config_exec",
        _config_exec,
        "make git run a program (-c core.sshCommand=..., alias !cmd, GIT_SSH_COMMAND)",
        names=_GIT,
    ),
]
