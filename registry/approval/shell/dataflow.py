"""What a command reads and writes: inline programs, stdin text, written files.

Contract: pure functions over one effective
:class:`~registry.approval.shell.resolve.Cmd` (its pipeline attached):

* :func:`inline_code` - the program text an interpreter runs inline
  (``python -c``, ``perl -e``, ``node -e``) or from a static stdin;
* :func:`reads_script_from_stdin` - whether a shell/interpreter executes stdin;
* :func:`stdin_text` - stdin content when it is known statically (here-docs,
  here-strings, ``echo``/``printf``/``cat <<EOF`` at the head of the pipeline);
* :func:`write_targets` - files the command writes, with truncate/append.
"""

from __future__ import annotations

import re

from registry.approval.shell.args import (
    has_long,
    operands,
    shell_c_script,
    short_flags,
    word_set,
)
from registry.approval.shell.names import SHELLS
from registry.approval.shell.resolve import Cmd
from registry.approval.shell.static import pipeline_output

__all__ = [
    "inline_code",
    "interpreter",
    "moved_away",
    "reads_script_from_stdin",
    "stdin_text",
    "write_targets",
]


_PY_RE = re.compile(r"^(?:python|pypy)\d*(?:\.\d+)*$")
# Interpreter family -> options whose next argument is inline code.
_CODE_OPTS: dict[str, tuple[str, ...]] = {
    "python": ("-c",),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "node": ("-e", "--eval", "-p", "--print"),
    "bun": ("-e", "--eval", "-p", "--print"),
    "php": ("-r",),
    "lua": ("-e",),
    "rscript": ("-e",),
    "osascript": ("-e",),
    "deno": ("eval",),
}
_NO_STDIN_OPTS = word_set(
    """
    -c -m -e -E -r --eval -p --print --version -V --help -h
    """
)


def interpreter(name: str) -> str | None:
    """Interpreter family of a program name (``python3.11`` -> ``python``), else None."""
    if _PY_RE.match(name):
        return "python"
    if name == "nodejs":
        return "node"
    return name if name in _CODE_OPTS else None


def inline_code(cmd: Cmd) -> str | None:
    """Inline program text of an interpreter call.

    ``python -c CODE``, ``perl -ne CODE``, ``node -e CODE``; or the statically
    known stdin of an interpreter reading its program from stdin
    (``python3 - <<EOF ... EOF``).
    """
    if cmd.code_memo:
        return cmd.code_memo[0]
    code = _inline_code(cmd)
    cmd.code_memo.append(code)
    return code


def _inline_code(cmd: Cmd) -> str | None:
    family = interpreter(cmd.name)
    if family is None:
        return None
    opts = _CODE_OPTS[family]
    args = cmd.args
    for i, a in enumerate(args):
        if i + 1 >= len(args):
            break
        if a in opts:
            return args[i + 1]
        if a.startswith("--") or not a.startswith("-"):
            if family != "deno":
                break
            continue
        # Clustered short options: "-Ic", "-lne", "-pe".
        if any(len(o) == 2 and a.endswith(o[1]) for o in opts):
            return args[i + 1]
        if family == "python" and "m" in a[1:]:
            break
    if reads_script_from_stdin(cmd):
        return stdin_text(cmd)
    return None


def reads_script_from_stdin(cmd: Cmd) -> bool:
    """True when ``cmd`` is a shell/interpreter that executes what arrives on stdin."""
    name = cmd.name
    args = cmd.args
    if name in ("iex", "invoke-expression"):
        return True
    if name in ("powershell", "pwsh"):
        return "-" in args
    if name in SHELLS:
        if shell_c_script(args) is not None:
            return False
        if "-s" in args:
            return True
        ops = operands(args, frozenset("oO"))
        return not ops or ops[0] == "-"
    if interpreter(name) is not None:
        if any(a in _NO_STDIN_OPTS for a in args):
            return False
        ops = operands(args, frozenset("WX"))
        return not ops or ops[0] == "-"
    return False


_COPY_ARG_OPTS = frozenset("tSgmoZ")
_IN_PLACE = frozenset({"perl", "ruby"})


def _no_clobber(args: list[str]) -> bool:
    return (
        "n" in short_flags(args)
        or has_long(args, "no-clobber")
        or any(a in ("--update=none", "--update=none-fail") for a in args)
    )


def _copy_destination(args: list[str]) -> str | None:
    ops = operands(args, _COPY_ARG_OPTS)
    target_dir = next(
        (a.split("=", 1)[1] for a in args if a.startswith("--target-directory=")), None
    )
    if "-t" in args and args.index("-t") + 1 < len(args):
        target_dir = args[args.index("-t") + 1]
    if target_dir:
        return target_dir.rstrip("/") + "/"
    return ops[-1] if len(ops) >= 2 else None


def write_targets(cmd: Cmd, *, include_copies: bool) -> list[tuple[str, bool]]:
    """Files ``cmd`` writes, as ``(path, truncates)``.

    Output redirections and ``tee`` always count (``tee -a``/``>>`` append);
    ``dd of=`` truncates. With ``include_copies`` also the destination of
    ``cp``/``mv``/``install``/``rsync`` (not with ``-n``/``--no-clobber``) and
    ``ln -f``, files edited in place by ``sed -i``/``perl -i``/``ruby -i`` and
    operands of ``truncate``. The result is memoised on ``cmd``: callers must not change it.
    """
    memo = cmd.writes_memo.get(include_copies)
    if memo is None:
        memo = cmd.writes_memo[include_copies] = _write_targets(cmd, include_copies)
    return memo


def _write_targets(cmd: Cmd, include_copies: bool) -> list[tuple[str, bool]]:
    out = [(r.target.text, r.truncates) for r in cmd.redirects if r.writes]
    name, args = cmd.name, cmd.args
    if name == "tee":
        append = "a" in short_flags(args) or has_long(args, "append")
        out.extend((o, not append) for o in operands(args))
    elif name == "dd":
        out.extend((a[3:], True) for a in args if a.startswith("of="))
    elif not include_copies:
        return out
    elif name in ("cp", "mv", "install", "rsync") or (
        name == "ln" and ("f" in short_flags(args) or has_long(args, "force"))
    ):
        dest = None if _no_clobber(args) and name != "ln" else _copy_destination(args)
        if dest:
            out.append((dest, True))
    elif name == "sed" and ("i" in short_flags(args) or has_long(args, "in-place")):
        ops = operands(args, frozenset("ef"))
        has_script_opt = any(
            a in ("-e", "-f") or a.startswith(("--expression", "--file")) for a in args
        )
        out.extend((o, True) for o in (ops if has_script_opt else ops[1:]))
    elif name in _IN_PLACE and any(a.startswith("-") and "i" in a[1:] for a in args):
        ops = operands(args, frozenset("eE"))
        out.extend((o, True) for o in ops)
    elif name == "truncate":
        out.extend((o, True) for o in operands(args, frozenset("sr")))
    return out


def moved_away(cmd: Cmd) -> list[str]:
    """Paths ``cmd`` removes from their place without deleting them (``mv`` sources)."""
    if cmd.name != "mv":
        return []
    ops = operands(cmd.args, _COPY_ARG_OPTS)
    has_dir = any(a == "-t" or a.startswith("--target-directory") for a in cmd.args)
    return ops if has_dir else ops[:-1]


def stdin_text(cmd: Cmd) -> str | None:
    """Text that reaches ``cmd``'s stdin when we can know it statically.

    Here-documents and here-strings on ``cmd`` itself, else the output of the
    pipeline's earlier commands when :func:`registry.approval.shell.static.pipeline_output`
    can compute it (``echo``/``printf``/``cat <<EOF``, through decoders such as
    ``base64 -d``, ``rev`` or ``tr``). None when unknown.
    """
    parts = [r.body for r in cmd.redirects if r.body is not None]
    if parts:
        return "\n".join(parts)
    if cmd.index == 0:
        return None
    return pipeline_output(cmd.piped_from())
