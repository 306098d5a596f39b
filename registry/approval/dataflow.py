"""What a command reads and writes: inline programs, stdin text, written files.

Contract: pure functions over one effective
:class:`~registry.approval.commands.Cmd` (its pipeline attached):

* :func:`inline_code` - the program text an interpreter runs inline
  (``python -c``, ``perl -e``, ``node -e``) or from a static stdin;
* :func:`reads_script_from_stdin` - whether a shell/interpreter executes stdin;
* :func:`stdin_text` - stdin content when it is known statically (here-docs,
  here-strings, ``echo``/``printf``/``cat <<EOF`` at the head of the pipeline);
* :func:`write_targets` - files the command writes, with truncate/append.
"""

from __future__ import annotations

import re

from registry.approval.commands import (
    SHELLS,
    Cmd,
    has_long,
    operands,
    shell_c_script,
    short_flags,
    word_set,
)

__all__ = [
    "inline_code",
    "interpreter",
    "printf_unescape",
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


def printf_unescape(text: str) -> str:
    """Decode the escapes ``printf``/``echo -e`` understand (``\\x72`` -> ``r``)."""
    if "\\" not in text:
        return text

    def sub(m: re.Match[str]) -> str:
        g = m.group(0)
        if g[1] == "x":
            return chr(int(g[2:], 16))
        if g[1] in "01234567":
            return chr(int(g[1:].lstrip("0") or "0", 8) % 0x110000)
        return {"n": "\n", "t": "\t", "\\": "\\", "r": "\n"}.get(g[1], g[1])

    return re.sub(r"\\(?:x[0-9A-Fa-f]{1,2}|[0-7]{1,4}|.)", sub, text)


_COPY_ARG_OPTS = frozenset("tSgmoZ")


def write_targets(cmd: Cmd, *, include_copies: bool) -> list[tuple[str, bool]]:
    """Files ``cmd`` writes, as ``(path, truncates)``.

    Output redirections and ``tee`` always count (``tee -a``/``>>`` append);
    ``dd of=`` truncates. With ``include_copies`` also the destination of
    ``cp``/``mv``/``install``/``ln -f``, files edited by ``sed -i`` and operands
    of ``truncate``.
    """
    out = [(r.target.text, r.truncates) for r in cmd.redirects if r.writes]
    name, args = cmd.name, cmd.args
    if name == "tee":
        append = "a" in short_flags(args) or has_long(args, "append")
        out.extend((o, not append) for o in operands(args))
    elif name == "dd":
        out.extend((a[3:], True) for a in args if a.startswith("of="))
    elif include_copies:
        if name in ("cp", "mv", "install", "ln", "rsync"):
            ops = operands(args, _COPY_ARG_OPTS)
            target_dir = next(
                (a.split("=", 1)[1] for a in args if a.startswith("--target-directory=")), None
            )
            if "t" in short_flags(args) and "-t" in args and args.index("-t") + 1 < len(args):
                target_dir = args[args.index("-t") + 1]
            if target_dir:
                out.append((target_dir.rstrip("/") + "/", True))
            elif len(ops) >= 2:
                out.append((ops[-1], True))
        elif name == "sed" and ("i" in short_flags(args) or has_long(args, "in-place")):
            ops = operands(args, frozenset("ef"))
            has_script_opt = any(
                a in ("-e", "-f") or a.startswith(("--expression", "--file")) for a in args
            )
            out.extend((o, True) for o in (ops if has_script_opt else ops[1:]))
        elif name == "truncate":
            out.extend((o, True) for o in operands(args, frozenset("sr")))
    return out


def stdin_text(cmd: Cmd) -> str | None:
    """Text that reaches ``cmd``'s stdin when we can know it statically.

    Here-documents and here-strings on ``cmd`` itself, else the output of the
    pipeline's first command when that is ``echo``/``printf`` (escapes decoded)
    or ``cat`` fed by a here-document. None when unknown.
    """
    parts = [r.body for r in cmd.redirects if r.body is not None]
    if parts:
        return "\n".join(parts)
    if cmd.index == 0:
        return None
    head = cmd.pipeline[0]
    if head.name in ("echo", "printf"):
        args = [
            a
            for a in head.args
            if not (head.name == "echo" and a in ("-e", "-n", "-E", "-ne", "-en"))
        ]
        if head.name == "printf" and len(args) > 1 and "%" in args[0]:
            args = args[1:]
        return printf_unescape(" ".join(args))
    if head.name == "cat" and not operands(head.args):
        bodies = [r.body for r in head.redirects if r.body is not None]
        return "\n".join(bodies) if bodies else None
    return None
