"""Running code that cannot be seen: remote or decoded content, unseen scripts, code channels.

Same contract as :mod:`registry.approval.rules`. Code whose text is visible
(``bash -c '...'``, ``python -c '...'``, a here-document into an interpreter,
a script written a moment before with known content, ``awk 'BEGIN{system("...")}'``,
``vim -c ':!...'``) is not judged here: :mod:`registry.approval.shell.nested`
hands it to the detector, which analyses it like any command. These rules
catch what is left: code fetched from the network or decoded on the way into
an interpreter, running a file written earlier in the same command whose
content cannot be seen, and interpreters told to run commands computed from
their input (``awk '{system($0)}'``, ``sed 's/x/y/e'``).
"""

from __future__ import annotations

import re
from functools import lru_cache

from registry.approval.rules.base import Pattern
from registry.approval.shell.args import has_long, short_flags
from registry.approval.shell.dataflow import inline_code, interpreter, reads_script_from_stdin
from registry.approval.shell.names import DECODERS, FETCHERS, INTERPRETERS, SHELLS
from registry.approval.shell.nested import awk_program, script_run_target, sed_program
from registry.approval.shell.parse import parse_script
from registry.approval.shell.resolve import Cmd, resolve

__all__ = ["INTERPRETER_PATTERNS", "substitution_kinds"]

_EXEC_CALL_RE = re.compile(r"\b(?:exec|eval|Function|compile|execSync|instance_eval)\s*\(")
_DECODE_RE = re.compile(
    r"b64decode|decodebytes|atob|Buffer\.from|unhexlify|fromhex|decode_base64|unpack|codecs\.decode",
    re.IGNORECASE,
)
_REMOTE_RE = re.compile(
    r"urlopen|requests\.get|urllib|http\.get|fetch\(|open-uri|LWP::|\bget\(|httpx|axios",
    re.IGNORECASE,
)
_AWK_DYNAMIC_RES = (
    re.compile(r"\bsystem\s*\(\s*(?!\")"),  # system(expr): a command built from data
    re.compile(r"\bprintf?\b[^|;}\"]*\|\s*\"(?:/bin/|/usr/bin/)?(?:ba|z|da|k)?sh\b"),
    re.compile(r"(?:\$\w+|\))\s*\|\s*getline"),  # "$0 | getline" runs the input line
    re.compile(r"\|&\s*(?!\")"),
)
_SED_EXEC_RE = re.compile(r"(?:^|[;\n{}])\s*[0-9$,/!]*\s*e\b(?!\s*\S)|s(.).*?\1.*?\1[gpIiMm0-9]*e")
# Calls that run a shell command or a program, per interpreter family.
_RUN_CALLS = {
    "python": r"os\.(?:system|popen|exec\w*|spawn\w*)|subprocess\.\w+|pty\.spawn"
    r"|commands\.getoutput",
    "node": r"(?:child_process|cp)\.\w+|execSync|spawnSync|execFileSync",
    "ruby": r"Kernel\.(?:system|exec|spawn)|IO\.popen|Open3\.\w+|\bsystem|\bspawn|\bexec",
    "perl": r"\bsystem|\bexec",
    "php": r"shell_exec|passthru|proc_open|popen|\bsystem|\bexec",
}
_RUN_CALL_RES = {f: re.compile(r"(?:" + rx + r")\s*\(\s*") for f, rx in _RUN_CALLS.items()}
_PERL_BARE_RE = re.compile(r"\b(?:system|exec)\s+(?=[$@])|`[^`]*\$[^`]*`|\bqx\s*[{(\[/][^})\]/]*\$")
_LIT = r"""[rRbBuU]?(?:"(?:[^"\\$#]|\\.)*"|'(?:[^'\\]|\\.)*')"""
_LITERAL_ARG_RE = re.compile(
    r"(?:" + _LIT + r"|\[\s*(?:" + _LIT + r"\s*,\s*)*(?:" + _LIT + r")?\s*,?\s*\])\s*[,)]"
)
_MAX_KIND_DEPTH = 4
_MAX_PARSED_KIND = 4096
_FETCHER_WORD_RE = re.compile(
    r"(?<![\w.-])(?:" + "|".join(sorted(re.escape(f) for f in FETCHERS)) + r")(?![\w.-])",
    re.IGNORECASE,
)
_DECODER_WORD_RE = re.compile(
    r"(?<![\w.-])(?:base64|base32|basenc|xxd|openssl|uudecode|gunzip|zcat|certutil)(?![\w.-])"
    r"|\brev\b|\btr\s",
    re.IGNORECASE,
)


def _exec_of(code: str, payload: re.Pattern[str]) -> bool:
    """An exec/eval call followed later by a payload token (linear: two searches)."""
    call = _EXEC_CALL_RE.search(code)
    return call is not None and payload.search(code, call.end()) is not None


def _is_decoder(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name not in DECODERS:
        return False
    if name in ("base64", "base32", "basenc"):
        return bool({"d", "D"} & short_flags(args)) or has_long(args, "decode")
    if name == "xxd":
        return "r" in short_flags(args)
    if name == "openssl":
        return "-d" in args or "-decrypt" in args
    if name == "xz":
        return "d" in short_flags(args) or has_long(args, "decompress")
    if name == "certutil":
        return any(a.lower() in ("-decode", "-decodehex", "/decode") for a in args)
    return True


def _cmd_kinds(cmd: Cmd, depth: int = 0) -> set[str]:
    kinds: set[str] = set()
    if cmd.name in FETCHERS:
        kinds.add("remote")
    elif _is_decoder(cmd) or (cmd.name in ("gzip", "bzip2") and "d" in short_flags(cmd.args)):
        kinds.add("decoded")
    for word_subs in cmd.subs:
        for sub in word_subs:
            kinds |= substitution_kinds(sub, depth + 1)
    return kinds


def _text_kinds(script: str) -> frozenset[str]:
    """:func:`substitution_kinds` by scanning words only: linear, for large scripts.

    Over-approximates (a fetcher named anywhere counts), which only matters
    when the output is run as code.
    """
    kinds = set()
    if _FETCHER_WORD_RE.search(script):
        kinds.add("remote")
    if _DECODER_WORD_RE.search(script):
        kinds.add("decoded")
    return frozenset(kinds)


@lru_cache(maxsize=256)
def substitution_kinds(script: str, depth: int = 0) -> frozenset[str]:
    """Subset of ``{"remote", "decoded"}``: does ``script``'s output come from a fetch/decoder.

    Parses scripts up to :data:`_MAX_PARSED_KIND` characters, :data:`_MAX_KIND_DEPTH`
    substitutions deep; larger ones are scanned for fetcher/decoder words instead.
    """
    if depth > _MAX_KIND_DEPTH or len(script) > _MAX_PARSED_KIND:
        return _text_kinds(script)
    kinds: set[str] = set()
    parsed = parse_script(script, max_items=2048)
    for pipeline in parsed.pipelines:
        for sc in pipeline:
            cmd = resolve(sc.words, sc.redirects)
            if cmd is not None:
                kinds |= _cmd_kinds(cmd, depth)
    return frozenset(kinds)


def _upstream_kinds(cmd: Cmd) -> set[str]:
    kinds: set[str] = set()
    for prev in cmd.piped_from():
        kinds |= _cmd_kinds(prev)
    for r in cmd.redirects:
        if r.op == "<":
            for sub in r.target.subs:
                kinds |= substitution_kinds(sub)
    return kinds


_EXEC_NAMES = (
    SHELLS
    | INTERPRETERS
    | frozenset({"eval", "source", ".", "iex", "invoke-expression", "powershell", "pwsh", "exec"})
)


def _substituted_kinds(cmd: Cmd) -> set[str]:
    """Kinds of substitutions whose output becomes code: argv[0] itself, or args of a shell/eval."""
    kinds: set[str] = set()
    if not cmd.subs:
        return kinds
    for sub in cmd.subs[0]:
        kinds |= substitution_kinds(sub)
    if cmd.name in _EXEC_NAMES or cmd.name.startswith("python"):
        for word_subs in cmd.subs[1:]:
            for sub in word_subs:
                kinds |= substitution_kinds(sub)
    return kinds


def _written_origin(cmd: Cmd) -> str | None:
    target = script_run_target(cmd)
    if target is None:
        return None
    written = cmd.ctx.written_file(target[0], cmd.cwd)
    return written.origin if written is not None else None


def _remote_code_exec(cmd: Cmd) -> bool:
    if reads_script_from_stdin(cmd) and "remote" in _upstream_kinds(cmd):
        return True
    code = inline_code(cmd)
    if code is not None and _exec_of(code, _REMOTE_RE):
        return True
    return "remote" in _substituted_kinds(cmd) or _written_origin(cmd) == "remote"


def _decoded_code_exec(cmd: Cmd) -> bool:
    if reads_script_from_stdin(cmd) and "decoded" in _upstream_kinds(cmd):
        return True
    code = inline_code(cmd)
    if code is not None and _exec_of(code, _DECODE_RE):
        return True
    return "decoded" in _substituted_kinds(cmd)


def _run_unseen_script(cmd: Cmd) -> bool:
    return _written_origin(cmd) == "unknown"


def _code_runs_computed(code: str, family: str) -> bool:
    """Inline code hands a command it computes (not a literal) to a shell or exec call."""
    rx = _RUN_CALL_RES.get(family)
    if rx is None:
        return False
    if family == "perl" and _PERL_BARE_RE.search(code):
        return True
    return any(not _LITERAL_ARG_RE.match(code, m.end()) for m in rx.finditer(code))


def _computed_commands(cmd: Cmd) -> bool:
    """An interpreter told to run commands computed from its input or its own variables."""
    code = inline_code(cmd)
    family = interpreter(cmd.name)
    if code is not None and family is not None and _code_runs_computed(code, family):
        return True
    program = awk_program(cmd)
    if program is not None:
        return any(rx.search(program) for rx in _AWK_DYNAMIC_RES)
    script = sed_program(cmd)
    return script is not None and bool(_SED_EXEC_RE.search(script))


INTERPRETER_PATTERNS: list[Pattern] = [
    Pattern(
        "remote_code_exec",
        _remote_code_exec,
        "run remote content (curl | sh, bash <(curl ...), curl -o f && sh f)",
    ),
    Pattern(
        "decoded_code_exec", _decoded_code_exec, "run decoded content in a shell (base64 -d | sh)"
    ),
    Pattern(
        "run_unseen_script",
        _run_unseen_script,
        "run a script written earlier in the command whose content cannot be seen",
    ),
    Pattern(
        "computed_command_exec",
        _computed_commands,
        "an interpreter runs commands computed from its input (awk system($0), sed e)",
    ),
]
