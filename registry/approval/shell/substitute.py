"""What a command substitution evaluates to, when it can be known without running it.

Contract: :func:`substitution_output` takes the inner script of ``$(...)`` or
backticks and the variables known at that point and returns its output, or
None. Static pipelines (:func:`registry.approval.shell.static.pipeline_output`)
give their exact output; a few lookup commands give a representative value
that has the property the rules care about: ``which rm``/``command -v rm`` ->
``/usr/bin/rm`` (the program it names), ``mktemp`` -> a path under ``/tmp``,
``pgrep``/``pidof``/``cat x.pid`` -> a process id (never ``-1``), ``pwd`` -> the
followed working directory. Never raises.
"""

from __future__ import annotations

import posixpath

from registry.approval.shell.args import operands, short_flags
from registry.approval.shell.expand import Vars, expand_words
from registry.approval.shell.names import PID_PRODUCERS
from registry.approval.shell.parse import parse_script
from registry.approval.shell.resolve import Cmd, resolve
from registry.approval.shell.static import pipeline_output

__all__ = ["substitution_output"]

_MAX_SCRIPT = 4096
_MAX_DEPTH = 3
_TEMP_DIR = "/tmp/tmp.sbxAAAAAAAA"


def _lookup_output(cmd: Cmd, vars: Vars) -> str | None:
    name, args = cmd.name, cmd.args
    ops = operands(args)
    if name == "which" and ops:
        return "/usr/bin/" + ops[0].rsplit("/", 1)[-1]
    if name == "command" and args[:1] in (["-v"], ["-V"]) and len(args) > 1:
        return "/usr/bin/" + args[-1].rsplit("/", 1)[-1]
    if name == "type" and ("P" in short_flags(args) or "p" in short_flags(args)) and ops:
        return "/usr/bin/" + ops[0].rsplit("/", 1)[-1]
    if name == "mktemp":
        return _TEMP_DIR
    if name in PID_PRODUCERS or (name == "cat" and ops and all(o.endswith(".pid") for o in ops)):
        return "4242"
    if name == "pwd":
        return vars.cwd
    if name in ("basename", "dirname") and ops and not any(cmd.unknown):
        fn = posixpath.basename if name == "basename" else posixpath.dirname
        path = ops[0]
        for home in ("${HOME}", "$HOME", "~"):
            if path == home or path.startswith(home + "/"):
                path = (vars.env or {}).get("HOME", "/home/user") + path[len(home) :]
                break
        return fn(path.rstrip("/")) or "/"
    return None


def substitution_output(script: str, vars: Vars, depth: int = 0) -> str | None:
    """Output of ``script`` as a command substitution, or None (see module docstring).

    Substitutions nested deeper than :data:`_MAX_DEPTH` are not evaluated.
    """
    if len(script) > _MAX_SCRIPT or depth > _MAX_DEPTH:
        return None

    def inner(sub: str, v: Vars) -> str | None:
        return substitution_output(sub, v, depth + 1)

    parsed = parse_script(script, max_items=256)
    if len(parsed.pipelines) != 1 or parsed.truncated or not parsed.balanced:
        return None
    cmds: list[Cmd] = []
    for sc in parsed.pipelines[0]:
        if sc.assigns or not sc.words:
            return None
        variants, capped = expand_words(sc.words, vars, inner)
        if capped or len(variants) != 1:
            return None
        cmd = resolve(variants[0], sc.redirects)
        if cmd is None:
            return None
        cmds.append(cmd)
    if len(cmds) == 1:
        looked_up = _lookup_output(cmds[0], vars)
        if looked_up is not None:
            return looked_up
    return pipeline_output(cmds)
