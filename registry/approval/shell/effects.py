"""Effects of one command on what the analysis knows for the commands after it.

Contract: :func:`apply_effects` updates :class:`~registry.approval.shell.expand.Vars`
for the builtins that change variables or the working directory (``cd``,
``pushd``/``popd``, ``set --``, ``read`` from a here-string, ``mapfile``,
``printf -v``, ``declare``/``export``/``local``..., ``for``/``select`` lists);
:func:`record_writes` records in the analysis
:class:`~registry.approval.shell.state.Context` the files a command writes and
what it writes into them when that is known (``echo``/``printf``/``cat
<<EOF`` output, a static pipeline) or where it came from (a download, some
other program). Unknown values make the variable unknown; nothing is ever
guessed into a harmless value.
"""

from __future__ import annotations

import posixpath
import re

from registry.approval.shell.args import operands, option_value
from registry.approval.shell.escapes import printf_format
from registry.approval.shell.expand import Vars, expand_assignment
from registry.approval.shell.names import FETCHERS
from registry.approval.shell.resolve import Cmd
from registry.approval.shell.state import Written, canonical_path
from registry.approval.shell.static import echo_output, pipeline_output
from registry.approval.shell.syntax import Redirect, Word

__all__ = ["apply_effects", "record_writes"]

_DECLARERS = frozenset({"export", "declare", "typeset", "local", "readonly"})
_READ_ARG_OPTS = frozenset("adinNptu")
_URL_NAME_RE = re.compile(r"^[a-z]+://[^/]+(?:/[^?#]*)?/([^/?#]+)(?:[?#].*)?$", re.IGNORECASE)


def _static_stdin(redirects: list[Redirect]) -> str | None:
    bodies = [r.body for r in redirects if r.body is not None]
    return "\n".join(bodies) if bodies else None


def _assign_text(vars: Vars, text: str, unknown: bool) -> None:
    assigned = expand_assignment(Word(text, text), vars, lambda _s, _v: None)
    if assigned is None:
        return
    name, values, items, unk, append = assigned
    if items is not None:
        vars.assign_array(name, items, unk or unknown)
    else:
        vars.assign(name, values, unk or unknown, append)


def _cd(args: list[str], known: bool, vars: Vars) -> None:
    ops = [a for a in args if a not in ("-L", "-P", "-e", "-@", "--")]
    if not ops:
        home = (vars.env or {}).get("HOME")
        vars.cwd = home or "~"
        return
    target = ops[0]
    if target in ("$HOME", "${HOME}") or target.startswith(("$HOME/", "${HOME}/")):
        target = "~" + target[target.index("}") + 1 if target.startswith("${") else 5 :]
    if not known or target == "-" or (not target.startswith(("/", "~")) and not vars.cwd):
        vars.cwd = None
        return
    vars.cwd = canonical_path(target, vars.cwd)


def _read(args: list[str], redirects: list[Redirect], vars: Vars, array: bool) -> None:
    names = operands(args, _READ_ARG_OPTS if not array else frozenset("dnOsCcu"))
    array_name = option_value(args, "-a")
    text = _static_stdin(redirects)
    if array or array_name:
        target = array_name or (names[0] if names else "MAPFILE")
        if text is None:
            vars.assign(target, [], True)
        else:
            items = text.split("\n") if array else text.split()
            vars.assign_array(target, items, False)
        return
    names = names or ["REPLY"]
    if text is None:
        for n in names:
            vars.assign(n, [], True)
        return
    fields = text.split("\n", 1)[0].split(None, len(names) - 1)
    for k, n in enumerate(names):
        vars.assign(n, [fields[k] if k < len(fields) else ""], False)


def apply_effects(words: list[Word], redirects: list[Redirect], vars: Vars) -> None:
    """Update ``vars`` for what the (expanded) command ``words`` will change."""
    texts = [w.text for w in words]
    while texts and texts[0] in ("builtin", "command"):
        texts, words = texts[1:], words[1:]
    if not texts:
        return
    name, args = texts[0], texts[1:]
    known = not any(w.unknown for w in words)
    if name in ("cd", "pushd"):
        _cd(args, known, vars)
    elif name == "popd":
        vars.cwd = None
    elif name == "set" and args and (args[0] == "--" or not args[0].startswith(("-", "+"))):
        vars.positional.append(args[1:] if args[0] == "--" else args)
    elif name == "read":
        _read(args, redirects, vars, array=False)
    elif name in ("mapfile", "readarray"):
        _read(args, redirects, vars, array=True)
    elif name == "printf" and args[:1] == ["-v"] and len(args) > 1:
        vars.assign(args[1], [printf_format(args[2:])], not known)
    elif name in _DECLARERS:
        for a in args:
            if "=" in a and not a.startswith("-"):
                _assign_text(vars, a, not known)
    elif name in ("for", "select") and len(args) >= 2 and args[1] == "in":
        values = [a for a in args[2:] if a not in ("do", ";")]
        vars.assign(args[0], values, not known)
    elif name in ("for", "select") and args:
        vars.assign(args[0], [], True)


def _content(cmd: Cmd) -> Written:
    """What ``cmd`` writes to its stdout, as far as it can be known."""
    if cmd.name in FETCHERS:
        return Written(None, "remote")
    text = echo_output(cmd) if cmd.index == 0 else pipeline_output(cmd.pipeline[: cmd.index + 1])
    return Written(text, "static") if text is not None else Written(None, "unknown")


def _download_target(cmd: Cmd) -> str | None:
    args = cmd.args
    if cmd.name in ("curl", "aria2c", "fetch", "http", "xh"):
        out = option_value(args, "-o", "--output", "--out")
        if out:
            return out
        if cmd.name == "curl" and any(a in ("-O", "--remote-name") or (
            a.startswith("-") and not a.startswith("--") and "O" in a) for a in args):  # fmt: skip
            urls = [a for a in args if "://" in a]
            m = _URL_NAME_RE.match(urls[0]) if urls else None
            return m.group(1) if m else None
        return None
    if cmd.name == "wget":
        out = option_value(args, "-O", "--output-document")
        if out:
            return out
        urls = [a for a in args if "://" in a]
        m = _URL_NAME_RE.match(urls[0]) if urls else None
        if m is None:
            return None
        directory = option_value(args, "-P", "--directory-prefix")
        return posixpath.join(directory, m.group(1)) if directory else m.group(1)
    return None


def record_writes(cmd: Cmd) -> None:
    """Record the files ``cmd`` writes (and their content when known) in its context."""
    ctx = cmd.ctx
    for r in cmd.redirects:
        if r.writes and r.target.text and not r.target.text.startswith("/dev/"):
            ctx.record_write(r.target.text, cmd.cwd, _content(cmd), append=not r.truncates)
    name = cmd.name
    if name == "tee":
        text = pipeline_output(cmd.piped_from()) if cmd.index else None
        written = Written(text, "static") if text is not None else Written(None, "unknown")
        for target in operands(cmd.args):
            ctx.record_write(target, cmd.cwd, written, append="-a" in cmd.args)
        return
    download = _download_target(cmd)
    if download:
        ctx.record_write(download, cmd.cwd, Written(None, "remote"), append=False)
        return
    if name in ("cp", "mv", "install", "ln") and len(operands(cmd.args)) == 2:
        source, dest = operands(cmd.args)
        prev = ctx.written_file(source, cmd.cwd)
        if prev is not None:
            ctx.record_write(dest, cmd.cwd, prev, append=False)
    elif name == "dd":
        for a in cmd.args:
            if a.startswith("of=") and not a[3:].startswith("/dev/"):
                ctx.record_write(a[3:], cmd.cwd, Written(None, "unknown"), append=False)
