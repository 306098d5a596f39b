"""Credentials in command arguments: ``--password PW``, ``docker login -p PW``, ``mysql -pPW``,
``curl -u user:PW``, ``openssl -passin pass:PW``, and ``.netrc`` ``password PW`` fields.

Long flags are judged by their name (``--api-key``, ``--db-password``;
``--password=PW`` is a key/value form).  A short flag means a password only
for some commands (``-p`` is a port for ``docker run``, a database name after
``mysql -p``), so the command of the flag's shell segment -- after prompts,
``sudo``, ``env`` and ``VAR=value`` prefixes -- is looked up in a table.
A ``.netrc`` password counts only after ``machine <host>`` or ``default``
(and their ``login``/``account``/``port`` fields), on the same or earlier lines.
"""

from __future__ import annotations

import re
from typing import Final

from .base import PLACEHOLDER, Hit, Rule, rule
from .keys import key_names_secret
from .values import is_non_secret_value
from .vendors import value_replacement, vendor_match

_TAILS: Final = ("password", "passwd", "passphrase", "pass", "pwd", "pw", "secret", "token",
                 "auth", "credential", "credentials", "key", "sig", "pat", "keys", "secrets",
                 "passwords", "bearer", "signature", "mnemonic", "phrase")

_LONG: Final = re.compile(
    r"""--(?P<flag>[A-Za-z][A-Za-z0-9-]{0,63}+)[ \t]{1,8}+"""
    r"""(?:"(?P<dq>[^"\r\n]{0,8192}+)"?|'(?P<sq>[^'\r\n]{0,8192}+)'?"""
    r"""|(?P<bare>[^\s"'`;&|<>(){}]{1,8192}+))"""
)


def _long(text: str, p: int) -> Hit | None:
    """``--password VALUE`` (``--password=VALUE`` is a key-value pair)."""
    m = _LONG.match(text, p)
    if m is None or not key_names_secret(m.group("flag")):
        return None
    group = m.lastgroup or ""
    value = m.group(group)
    if (group == "bare" and value.startswith("-")) or is_non_secret_value(value):
        return None
    return (*m.span(group), value_replacement(value))


# ------------------------------------------------------------------ short flags
# How a value follows its flag: glued (-pPW), after blanks (-p PW), or either.
_GLUED, _APART, _EITHER = "glued", "apart", "either"
# What the value is: a secret; user:secret; user%secret; pass:secret.
_SECRET, _USER_COLON, _USER_PERCENT, _PASS_COLON = "secret", "user:", "user%", "pass:"
_LOGIN: Final = {"p": (_EITHER, _SECRET)}
_MYSQL: Final = {"p": (_GLUED, _SECRET)}
_MONGO: Final = {"p": (_EITHER, _SECRET)}
_LDAP: Final = {"w": (_EITHER, _SECRET)}
_KEYTOOL: Final = {f: (_APART, _SECRET) for f in (
    "storepass", "keypass", "srcstorepass", "deststorepass", "srckeypass", "destkeypass")}
#: Commands whose -p is a password only in their ``login`` subcommand.
_NEEDS_LOGIN: Final = frozenset({"docker", "podman", "buildah", "skopeo", "oras", "nerdctl",
                                 "helm", "az"})
_FLAGS: Final[dict[str, dict[str, tuple[str, str]]]] = {
    **{c: _LOGIN for c in _NEEDS_LOGIN},
    "sshpass": {"p": (_EITHER, _SECRET)},
    **{c: _MYSQL for c in ("mysql", "mariadb", "mysqldump", "mysqladmin", "mysqlimport",
                           "mysqlcheck", "mysqlshow", "mysqlpump", "mariadb-dump")},
    "redis-cli": {"a": (_EITHER, _SECRET)},
    **{c: _MONGO for c in ("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport",
                           "mongoimport", "mongostat", "mongotop")},
    **{c: _LDAP for c in ("ldapsearch", "ldapadd", "ldapmodify", "ldapdelete", "ldapwhoami",
                          "ldappasswd", "ldapcompare", "ldapmodrdn", "ldapexop")},
    **{c: {"P": (_EITHER, _SECRET)} for c in ("zip", "unzip", "zipcloak", "sqlcmd", "bcp", "osql")},
    **{c: {"p": (_GLUED, _SECRET)} for c in ("7z", "7za", "7zr")},
    "ssh-keygen": {"N": (_EITHER, _SECRET), "P": (_EITHER, _SECRET)},
    **{c: {"U": (_EITHER, _USER_PERCENT)} for c in ("smbclient", "rpcclient")},
    "curl": {"u": (_EITHER, _USER_COLON), "U": (_EITHER, _USER_COLON),
             "-user": (_APART, _USER_COLON), "-proxy-user": (_APART, _USER_COLON)},
    "openssl": {"passin": (_APART, _PASS_COLON), "passout": (_APART, _PASS_COLON),
                "pass": (_APART, _PASS_COLON), "k": (_APART, _SECRET)},
    "keytool": _KEYTOOL,
}
#: Words before the command: wrappers and their options.
_WRAPPERS: Final = frozenset({"sudo", "doas", "env", "exec", "time", "nohup", "command",
                              "builtin", "nice", "xargs", "watch"})
_SEGMENT: Final = 1024  # the furthest back a flag's command is looked for
_FLAG: Final = re.compile(r"-(?P<flag>-?[A-Za-z][A-Za-z-]{0,31}+)")
_QUOTED_OR_BARE: Final = (r"""(?:"(?P<dq>[^"\r\n]{1,8192}+)"|'(?P<sq>[^'\r\n]{1,8192}+)'"""
                           r"""|(?P<bare>[^\s"'`;&|<>]{1,8192}+))""")
_WORD: Final = re.compile(r"[ \t]{1,8}+" + _QUOTED_OR_BARE)
_GLUED_VALUE: Final = re.compile(_QUOTED_OR_BARE)


def _command(text: str, p: int) -> tuple[str, list[str]]:
    """The command of the shell segment before ``p``, and the segment's words.

    A segment that starts more than :data:`_SEGMENT` characters back has no
    known command (so a flag's verdict never depends on where a window cut a word).
    """
    lo = max(0, p - _SEGMENT)
    window = text[lo:p]
    cut = max(window.rfind(c) for c in "\n\r;|&`(")
    if cut < 0 and lo > 0:
        return "", []
    words = window[cut + 1 :].split()
    i = 0
    while i < len(words):
        w = words[i]
        if w[-1] in "$#>%" or w == "+" or "=" in w.split("/")[0]:  # prompt, xtrace, VAR=x
            i += 1
        elif w in _WRAPPERS:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 2 if words[i] in ("-u", "-g") else 1
        else:
            break
    if i >= len(words):
        return "", []
    return words[i].rsplit("/", 1)[-1], words[i + 1 :]


def _short(text: str, p: int) -> Hit | None:
    """A password flag of a known command: ``sshpass -p PW``, ``curl -u user:PW``."""
    flag = _FLAG.match(text, p + 1)
    if flag is None:
        return None
    name = flag.group("flag")
    command, words = _command(text, p)
    table = _FLAGS.get(command)
    letter = name[0]
    if table is None or (command in _NEEDS_LOGIN and "login" not in words):
        return None
    if name in table and name != letter:  # -passin, --user: a word of its own
        how, kind = table[name]
        value = _WORD.match(text, flag.end()) if how != _GLUED else None
    elif letter in table:
        how, kind = table[letter]
        glued = flag.start() + 2  # -pSECRET: the value starts right after the letter
        if text[glued : glued + 1] in (" ", "\t"):
            value = _WORD.match(text, glued) if how != _GLUED else None
        else:
            value = _GLUED_VALUE.match(text, glued) if how != _APART else None
    else:
        return None
    if value is None:
        return None
    group = value.lastgroup or ""
    return _secret_in(text, *value.span(group), kind)


def _secret_in(text: str, start: int, end: int, kind: str) -> Hit | None:
    value = text[start:end]
    if kind == _SECRET:
        if value.startswith("-") or is_non_secret_value(value):
            return None
        return start, end, value_replacement(value)
    sep = {_USER_COLON: ":", _USER_PERCENT: "%", _PASS_COLON: ":"}[kind]
    user, found, secret = value.partition(sep)
    if not found or is_non_secret_value(secret) or (kind == _PASS_COLON and user != "pass"):
        return None
    if kind == _USER_COLON and vendor_match(user):  # curl -u AC<sid>:<token>: both go
        return start, end, f"{value_replacement(user)}:{PLACEHOLDER}"
    return start + len(user) + 1, end, value_replacement(secret)


# ------------------------------------------------------------------ .netrc
_NETRC_BEFORE: Final = re.compile(
    r"(?:\A|\s)(?:machine\s+\S+|default)(?:\s+(?:login|account|port)\s+\S+){0,3}\s+\Z"
)
_NETRC_VALUE: Final = re.compile(r"[ \t]{1,8}+(?P<v>\S{1,8192}+)")


def _netrc(text: str, p: int) -> Hit | None:
    """``machine host login bob password PW`` (on one line or several)."""
    lo = max(0, p - 256)
    if ((text.find("machine", lo, p) < 0 and text.find("default", lo, p) < 0)
            or _NETRC_BEFORE.search(text, lo, p) is None):
        return None
    m = _NETRC_VALUE.match(text, p + len("password"))
    if m is None or is_non_secret_value(m.group("v")):
        return None
    return m.start("v"), m.end("v"), value_replacement(m.group("v"))


RULES: Final[tuple[Rule, ...]] = (
    rule("cli-long", r"""--(?<![^\s"'(]--)(?=(?:[A-Za-z0-9]{1,32}+-){0,6}(?:"""
         + "|".join(_TAILS) + r")[ \t]{1,8}+[^\s-])", _long),
    rule("cli-short", r" -(?=[pPuUawNk]|-(?:user|proxy-user)[ \t]|pass(?:in|out)?[ \t]"
                      r"|(?:src|dest)?(?:store|key)pass[ \t])", _short),
    rule("netrc", r"password(?<![^\s]password)(?=[ \t]{1,8}+\S)", _netrc),
)
