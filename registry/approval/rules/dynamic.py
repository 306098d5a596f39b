"""Commands the detector cannot resolve statically.

Same contract as :mod:`registry.approval.rules`. The shell model resolves
what it can (variables assigned in the command or exported in the session,
static substitutions, ``set --``, ``IFS`` changes); these rules catch the
rest. A program name that stays unknown (``$X -rf dir`` with ``X`` unknown,
``$(cat name) ...``) needs approval; with a recursive option on ``/`` or a
home directory it is hardline (:mod:`.hardline`). A shell or ``eval`` running
a variable's unknown value needs approval. Destructive programs whose
arguments hold an unknown variable need approval, because that value can
carry options (``X='-rf /'; rm $X``).
"""

from __future__ import annotations

from registry.approval.rules.base import Pattern
from registry.approval.shell.args import shell_c_script, word_set
from registry.approval.shell.names import SHELLS
from registry.approval.shell.resolve import UNKNOWN_VAR, Cmd

__all__ = ["DYNAMIC_PATTERNS"]

_DESTRUCTIVE = word_set(
    """
    rm unlink shred srm rmdir kill pkill killall chmod chown chgrp truncate dd rsync mkfs
    """
)
_GIT_SENSITIVE = frozenset({"push", "reset", "clean", "checkout", "branch", "restore", "stash"})


def _dynamic_command(cmd: Cmd) -> bool:
    if cmd.dynamic:
        return True
    name, args = cmd.name, cmd.args
    if name == "eval":
        return any(cmd.unknown[i] == UNKNOWN_VAR for i in range(1, len(cmd.unknown)))
    if name in SHELLS:
        script = shell_c_script(args)
        return script is not None and any(
            cmd.unknown[i + 1] == UNKNOWN_VAR for i, a in enumerate(args) if a is script
        )
    if name in ("source", "."):
        return len(cmd.unknown) > 1 and cmd.unknown[1] == UNKNOWN_VAR and args[0].startswith("$")
    return False


def _dynamic_arguments(cmd: Cmd) -> bool:
    name = cmd.name
    if name == "git":
        if not any(a in _GIT_SENSITIVE for a in cmd.args[:3]):
            return False
    elif name == "find":
        if "-delete" not in cmd.args and not any(a.startswith("-exec") for a in cmd.args):
            return False
    elif name not in _DESTRUCTIVE:
        return False
    args = cmd.args
    end = args.index("--") if "--" in args else len(args)
    return any(cmd.unknown[i + 1] == UNKNOWN_VAR for i in range(min(end, len(cmd.unknown) - 1)))


DYNAMIC_PATTERNS: list[Pattern] = [
    Pattern(
        "dynamic_command",
        _dynamic_command,
        'the program or script to run cannot be determined ($X args, eval "$X", sh -c "$X")',
    ),
    Pattern(
        "dynamic_arguments",
        _dynamic_arguments,
        "a destructive command whose arguments hold an unknown value (rm $X)",
    ),
]
