"""Scripts that one command runs besides itself.

Contract: :func:`nested_scripts` returns the shell source texts that ``cmd`` will
execute or hand to another shell: ``bash -c``/``sh -c`` strings (also when the
shell is an argument of ``docker run``/``kubectl exec``), ``eval`` arguments,
``xargs``/``find -exec`` commands, ``docker exec`` and ``kubectl exec``
commands, ``ssh`` remote commands, ``cmd /c`` and ``powershell -Command``
strings, decoded ``powershell -EncodedCommand`` payloads, ``trap`` and ``alias``
bodies, text fed on stdin to a shell (also decoded on the way: ``base64 -d``),
shell strings passed to exec-style calls inside interpreter code
(``os.system('...')``, ``subprocess.run([...])``, Perl/Ruby backticks), the
side channels of :mod:`.channels` (``awk``, ``vim -c``, ``tmux send-keys``,
``git -c core.sshCommand=`` ...), and a script written earlier in the same
command when its content is known (``cat > x.sh <<EOF ... EOF; sh x.sh``).

Each returned text is analysed like a top-level command by the detector.
"""

from __future__ import annotations

import base64
import binascii
import re

from registry.approval.shell.args import (
    join_argv,
    operands,
    shell_c_script,
    subcommand,
    word_set,
)
from registry.approval.shell.channels import (
    awk_program,
    channel_scripts,
    script_run_target,
    sed_program,
    written_script,
)
from registry.approval.shell.dataflow import (
    inline_code,
    interpreter,
    reads_script_from_stdin,
    stdin_text,
)
from registry.approval.shell.expand import Vars
from registry.approval.shell.names import DATA_COMMANDS, SHELLS
from registry.approval.shell.resolve import (
    UNKNOWN_SUB,
    Cmd,
    basename,
    find_exec_commands,
    xargs_command,
)
from registry.approval.shell.substitute import substitution_output

__all__ = [
    "awk_program",
    "code_exec_strings",
    "nested_scripts",
    "powershell_encoded_payload",
    "script_run_target",
    "sed_program",
]

_ENGINES = frozenset({"docker", "podman", "nerdctl", "finch"})
_EXEC_SHORT = frozenset("euw")
_EXEC_LONG = frozenset({"env", "env-file", "user", "workdir", "detach-keys"})
# "docker run" options that take no value (every other option takes the next word).
_RUN_FLAGS = word_set(
    """
    -d -i -t -P --rm --detach --interactive --tty --privileged --init --read-only
    --publish-all --no-healthcheck --oom-kill-disable --sig-proxy --quiet -q
    """
)
_SSH_ARG_OPTS = frozenset("BbcDEeFIiJLlmOopQRSWw")
_LITERAL = r"""(?:[fFrRbBuU]{0,2})(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
_EXEC_CALL_RE = re.compile(
    r"(?:\b(?:system|popen[23]?|spawn\w*|exec[a-zA-Z]*|check_output|check_call|call|run|Popen"
    r"|shell_exec|passthru|proc_open|getoutput|getstatusoutput|run_command|capture[23]\w*)\s*\(\s*"
    r"|\bdo\s+shell\s+script\s+|\bsystem\s+)"
    rf"(?P<arg>\[[^\]]*\]|{_LITERAL})",
    re.DOTALL,
)
_LITERAL_RE = re.compile(_LITERAL, re.DOTALL)
_BACKTICK_CODE_RE = re.compile(
    r"`([^`]+)`|\bqx\s*[{(\[/](.*?)[})\]/]|%x\s*[{(\[](.*?)[})\]]", re.DOTALL
)


def _is_encoded_flag(arg: str) -> bool:
    if len(arg) < 2 or arg[0] not in "-/":
        return False
    body = arg[1:].lower()
    # -e, -ec and every prefix of -encodedcommand from "en" (PowerShell accepts these).
    return body in ("e", "ec") or (len(body) >= 2 and "encodedcommand".startswith(body))


def powershell_encoded_payload(cmd: Cmd) -> str | None:
    """The base64 argument of ``powershell -EncodedCommand``, if ``cmd`` is one."""
    if cmd.name not in ("powershell", "pwsh", "powershell_ise"):
        return None
    for i, a in enumerate(cmd.args):
        if _is_encoded_flag(a):
            return cmd.args[i + 1] if i + 1 < len(cmd.args) else ""
    return None


def _unquote_literal(lit: str) -> str:
    body = lit.lstrip("fFrRbBuU")
    return re.sub(r"\\(.)", r"\1", body[1:-1])


def code_exec_strings(code: str, family: str | None = None) -> list[str]:
    """Shell command strings passed to exec-style calls in interpreter ``code``."""
    out: list[str] = []
    for m in _EXEC_CALL_RE.finditer(code):
        arg = m.group("arg")
        if arg.startswith("["):
            out.append(join_argv(_unquote_literal(x) for x in _LITERAL_RE.findall(arg)))
        else:
            out.append(_unquote_literal(arg))
    if family not in ("perl", "ruby", "php"):
        return out  # backticks run commands only in these languages
    for m in _BACKTICK_CODE_RE.finditer(code):
        out.append(next(g for g in m.groups() if g is not None))
    return out


def _decode_b64(text: str, encoding: str = "utf-8") -> str | None:
    compact = "".join(text.split())
    if not compact:
        return None
    try:
        raw = base64.b64decode(compact + "=" * (-len(compact) % 4), validate=False)
    except (binascii.Error, ValueError):
        return None
    return raw.decode(encoding, errors="ignore")


def _engine_exec(cmd: Cmd) -> list[str]:
    """Inner command of ``docker exec [opts] CONTAINER cmd...`` (also ``container exec``)."""
    idx, verb = subcommand(cmd.args, frozenset("Hc"), frozenset({"host", "context", "config"}))
    rest = cmd.args[idx + 1 :] if idx >= 0 else []
    if verb == "container" and rest[:1] in (["exec"], ["run"]):
        verb, rest = rest[0], rest[1:]
    if verb not in ("exec", "run"):
        return []
    flags = _RUN_FLAGS if verb == "run" else frozenset()
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        a = rest[i]
        if verb == "run":
            # Flags and clusters (-it) stand alone; other options take the next word.
            alone = a in flags or "=" in a or (a[1:2] != "-" and len(a) > 2)
            i += 1 if alone else 2
        else:
            i += 2 if (len(a) == 2 and a[1] in _EXEC_SHORT) or a[2:] in _EXEC_LONG else 1
    inner = rest[i + 1 :]  # skip the container name / image
    return [join_argv(inner)] if inner else []


def _xargs_template(cmd: Cmd) -> list[str]:
    """The command ``xargs`` runs, its input placeholder made a path that is not scratch."""
    argv = xargs_command(cmd)
    replace = None
    for i, a in enumerate(cmd.args):
        if a == "-I" and i + 1 < len(cmd.args):
            replace = cmd.args[i + 1]
        elif a.startswith("-I") and len(a) > 2:
            replace = a[2:]
        elif a in ("-i", "--replace"):
            replace = "{}"
        elif a.startswith("--replace="):
            replace = a.split("=", 1)[1]
    if not replace:
        return argv
    return [a.replace(replace, "xargs-input") for a in argv]


def _ssh_remote(cmd: Cmd) -> list[str]:
    rest = operands(cmd.args, _SSH_ARG_OPTS)
    return [" ".join(rest[1:])] if len(rest) > 1 else []


def _powershell(cmd: Cmd) -> list[str]:
    out: list[str] = []
    payload = powershell_encoded_payload(cmd)
    if payload:
        decoded = _decode_b64(payload, "utf-16-le")
        if decoded:
            out.append(decoded)
    for i, a in enumerate(cmd.args):
        # -Command and its abbreviations (-c, -com, ...), also spelled with "/".
        if len(a) >= 2 and a[0] in "-/" and "command".startswith(a[1:].lower()):
            if i + 1 < len(cmd.args):
                out.append(" ".join(cmd.args[i + 1 :]))
            break
    return out


_STDIN_FILES = frozenset({"/dev/stdin", "/proc/self/fd/0", "/dev/fd/0", "-"})


def _sourced_output(cmd: Cmd) -> list[str]:
    """What ``source``/a shell reads from ``/dev/stdin`` or a static ``<(...)``."""
    out: list[str] = []
    first = cmd.args[0] if cmd.args else ""
    if first in _STDIN_FILES:
        text = stdin_text(cmd)
        if text:
            out.append(text)
    for sub in cmd.subs[1] if len(cmd.subs) > 1 else []:
        value = substitution_output(sub, Vars())
        if value:
            out.append(value)
    return out


_SOLE_SUBSTITUTION_RE = re.compile(r'^"?(?:\$\(.*\)|`.*`)"?$', re.DOTALL)


def _opaque_output(cmd: Cmd, arg: str) -> bool:
    """``arg`` is nothing but the unknown output of a command substitution.

    Its text cannot be analysed; the rules judge where it comes from instead
    (a download or a decoder needs approval, a local tool such as
    ``pyenv init -`` does not).
    """
    for i, a in enumerate(cmd.argv):
        if a is arg or (a == arg and i > 0):
            return cmd.unknown[i] == UNKNOWN_SUB and bool(_SOLE_SUBSTITUTION_RE.match(cmd.raw[i]))
    return False


def nested_scripts(cmd: Cmd) -> list[str]:
    """Shell texts run on behalf of ``cmd`` (see module docstring)."""
    out = list(cmd.nested)
    name, args = cmd.name, cmd.args
    if name in SHELLS:
        script = shell_c_script(args)
        if script is not None and not _opaque_output(cmd, script):
            out.append(script)
    elif name == "eval":
        if not all(_opaque_output(cmd, a) for a in args):
            out.append(" ".join(args))
    elif name == "alias":
        out.extend(a.split("=", 1)[1] for a in args if "=" in a)
    elif name == "trap":
        if args and args[0] not in ("-l", "-p", "--"):
            out.append(args[0])
    elif name == "xargs":
        out.append(join_argv(_xargs_template(cmd)))
    elif name == "find":
        out.extend(join_argv(c) for c in find_exec_commands(cmd))
    elif name in _ENGINES:
        out.extend(_engine_exec(cmd))
    elif name == "kubectl":
        if ("exec" in args or "run" in args or "debug" in args) and "--" in args:
            out.append(join_argv(args[args.index("--") + 1 :]))
    elif name in ("ssh", "autossh"):
        out.extend(_ssh_remote(cmd))
    elif name == "cmd":
        for i, a in enumerate(args):
            if a.lower() in ("/c", "/k", "/r"):
                out.append(" ".join(args[i + 1 :]))
                break
    elif name in ("powershell", "pwsh"):
        out.extend(_powershell(cmd))
    if name not in SHELLS and name not in DATA_COMMANDS:
        # "docker run img sh -c '...'", "kubectl run ... -- bash -lc '...'".
        for i, a in enumerate(cmd.argv[1:], start=1):
            if basename(a) in SHELLS:
                script = shell_c_script(cmd.argv[i + 1 :])
                if script is not None:
                    out.append(script)
    if reads_script_from_stdin(cmd) and (
        name in SHELLS or name in ("iex", "invoke-expression", "powershell", "pwsh")
    ):
        text = stdin_text(cmd)
        if text:
            out.append(text)
    if name in SHELLS or name in ("source", "."):
        out.extend(_sourced_output(cmd))
    code = inline_code(cmd)
    if code:
        out.extend(code_exec_strings(code, interpreter(name)))
    out.extend(channel_scripts(cmd))
    written = written_script(cmd)
    if written:
        out.append(written)
    return out
