"""Key/value forms: env, shell, JSON, YAML, TOML, INI, properties, headers, cookies, XML, queries.

``KEY=value``, ``"key": "value"``, ``key: value``, ``key = "value"``,
``key := v``, ``'key' => 'v'``, ``<password>v</password>``,
``{"name": "API_KEY", "value": "v"}``, ``Authorization: Bearer v``: when the
key names a secret (:mod:`.keys`), the value goes and everything around it --
quotes, inline comments (``KEY=[REDACTED] # prod``), the next field --
stays.  Decisions, with reasons:

* References, placeholders, masks, paths and our own output are not values
  (:mod:`.values`); neither is code (``password = getpass()``,
  ``token = await get()``, ``key = os.environ["X"]``, ``f'...'``) nor prose
  after a colon (``passwd: password updated successfully``).
* A key that is part of a file path is a file name: ``cat: /secret.key: No
  such file or directory`` keeps its error text.
* Unquoted values end at whitespace (shell semantics), except under plural
  names (``API_KEYS=a,b`` loses both), mnemonic names (``MNEMONIC: w1 w2 ...``
  loses the 12-24 words) and ``Authorization``/``Cookie`` headers (the rest of
  the line, keeping the scheme word: ``Authorization: Bearer [REDACTED]``).
"""

from __future__ import annotations

import re
from typing import Final

from .base import PLACEHOLDER, Hit, Rule, by_length, gate, rule
from .hashes import mnemonic_words
from .keys import key_is_header, key_is_plural, key_names_mnemonic, key_names_secret, key_words
from .values import PLACEHOLDER_RE, is_non_secret_value
from .vendors import value_replacement

#: Last words of secret key names as they end right before ``=``/``:``/``>``.
KEY_TAILS: Final = [
    "password", "passwd", "passphrase", "pass", "pwd", "_pw", "-pw", ".pw", "secret", "token",
    "auth", "authorization", "credential", "credentials", "cookie", "key", "sig", "pat", "base",
    "keys", "secrets", "passwords", "bearer", "signature", "mnemonic", "phrase",
    "words", "material", "data", "key_id", "key-id", "keyid", "value",
]
#: Between a key and its separator: closing quote/bracket, JSON escape, blanks.
_FILL: Final = r"""[\]"'\\ \t]"""
MAX_FILLER: Final = 3
# TOKEN=$GITHUB_TOKEN, password: ${DB_PASSWORD}: a reference, never a candidate.
_NOT_REF: Final = r"""(?![ \t]{0,32}+["']?\$[A-Za-z_{(])"""


def _key_tail(suffix: str, fillers: int = 0) -> str:
    """Key word, then ``fillers`` filler chars, then ``suffix``; nested so each
    extra filler is checked only when the one before it is there."""
    tail = _FILL * fillers + re.escape(suffix)
    here = f"{gate(KEY_TAILS, True, tail, 3)}(?:{by_length(KEY_TAILS, True, tail)})"
    if fillers == MAX_FILLER:
        return here
    deeper = f"(?<={_FILL}{tail})(?:{_key_tail(suffix, fillers + 1)})"
    return f"{here}|{deeper}"


# Read backwards (on a reversed slice) so finding a key is one bounded match.
_KEY_REV: Final = re.compile(r"""[\]"'\\ \t]{0,3}+(?P<key>[A-Za-z0-9_.\-]{1,64}+)""")
_VALUE: Final = re.compile(
    r"""[ \t]{0,32}+(?:
        "(?P<dq>(?:[^"\\\r\n]|\\.){0,4096}+)
      | '(?P<sq>[^'\r\n]{0,8192}+)
      | \\"(?P<eq>(?:[^"\\\r\n]|\\[^"\r\n]){0,4096}+)
      | (?P<bare>[^\s"'`,;&|<>(){}\[\]]{1,8192}+)
    )""",
    re.X,
)
_LIST: Final = re.compile(r"""[^\s"'`;&|<>(){}\[\]]{1,8192}+""")
_ARRAY: Final = re.compile(
    r"""[ \t]{0,32}+\[(?P<items>[ \t]{0,8}+"""
    r"""(?:"(?:[^"\\\r\n]|\\.){0,4096}+"[ \t]{0,8}+,?[ \t]{0,8}+){1,64}+)\]"""
)
_ITEM: Final = re.compile(r'"((?:[^"\\\r\n]|\\.){0,4096}+)"')
_REST_OF_LINE: Final = re.compile(r"""[^\r\n"'`]{1,8192}+""")
_SCHEME: Final = re.compile(
    r"(?i:bearer|basic|token|digest|bot|negotiate|ntlm|apikey|api-key|key|sso-key|ssws|oauth"
    r"|jwt|hawk|aws4-hmac-sha256|aws)[ \t]{1,8}+(?=\S)"
)
#: Prose after a colon: "passwd: password updated", "cat: x: No such file".
_PROSE: Final = re.compile(r"[A-Za-z][a-z]{0,31}[,.;!?]?[ \t]+[A-Za-z]")
#: Code, not a value: ``token = await get()``, ``key = new Key()``.
_CODE_WORDS: Final = frozenset({"await", "new", "yield", "function", "async", "lambda",
                                "require", "import", "typeof", "not", "return"})
#: Python string prefixes: ``auth = f'...'`` is code.
_STRING_PREFIXES: Final = frozenset({"f", "b", "r", "u", "rb", "br", "fr", "rf", "F", "B", "R"})
_VERSION: Final = re.compile(r"[ \t]{0,8}+[0-9]+(?:\.[0-9A-Za-z+!-]+)*+(?![^\s,;:)\]])")
#: Code references to configuration: ``token = process.env.TOKEN``, ``key = self.key``.
_CODE_REF: Final = re.compile(
    r"(?:process\.env|os\.environ|import\.meta\.env|self|this|config|settings|props|options"
    r"|opts|args|cfg|conf|ctx|context|params|request|req|app|env)\.[A-Za-z_][A-Za-z0-9_.]{0,128}"
)
#: ``{"name": "API_KEY", "value": "v"}``, ``<add key="Password" value="v"/>``, and the
#: Kubernetes ``- name: API_KEY`` / ``value: v`` pair across one line break.
_NAMED_BY: Final = re.compile(
    r"""(?:name|key)["']?[ \t]*[:=][ \t]*["']?(?P<n>[A-Za-z0-9_.-]{1,64})["']?[ \t]*[,;]?"""
    r"""[ \t]*(?:\r?\n[ \t]*-?[ \t]*)?["']?\Z"""
)


def _value_hit(text: str, start: int, key: str, colon: bool) -> Hit | None:
    """Find the value starting at ``start`` (after the separator) and decide on it."""
    if key_names_mnemonic(key):
        words = mnemonic_words(text, start)
        if words is not None:
            return (*words, PLACEHOLDER)
    header = key_is_header(key)
    if header and key_words(key)[-2:] == ["set", "cookie"]:
        return _set_cookie(text, start)
    m = _VALUE.match(text, start)
    if m is None:
        array = _ARRAY.match(text, start)
        return None if array is None else _array_hit(array)
    group = m.lastgroup or ""
    vs, ve = m.span(group)
    if PLACEHOLDER_RE.match(text, vs):  # already redacted: sk-...[REDACTED]
        return None
    if group == "bare":
        after = text[ve : ve + 1]
        if header:  # Authorization: Bearer x / Cookie: a=1; b=2 -- the whole line
            rest = _REST_OF_LINE.match(text, vs)
            ve = vs + len(rest.group().rstrip()) if rest else ve
        elif (after in ("(", "[") or (after in ("'", '"') and m.group(group) in _STRING_PREFIXES)
              or (after == " " and m.group(group) in _CODE_WORDS)
              or (colon and _PROSE.match(text, vs)) or _CODE_REF.fullmatch(m.group(group))):
            return None  # code (f'...', getpass(), await x, os.environ[...]) or prose
        elif after == "," and key_is_plural(key):
            items = _LIST.match(text, vs)
            ve = ve if items is None else items.end()
    if header or group != "bare":
        scheme = _SCHEME.match(text, vs, ve)
        if scheme is not None:
            vs = scheme.end()
    value = text[vs:ve]
    if is_non_secret_value(value):
        return None
    return vs, ve, value_replacement(value)


_SET_COOKIE: Final = re.compile(r"[ \t]{0,32}+[^=;\s]{1,256}+=(?P<v>[^;\r\n]{1,8192}+)")


def _set_cookie(text: str, start: int) -> Hit | None:
    """``Set-Cookie: sid=v; Path=/; HttpOnly``: the value goes, the name and attributes stay."""
    m = _SET_COOKIE.match(text, start)
    if m is None or is_non_secret_value(m.group("v")):
        return None
    return m.start("v"), m.end("v"), PLACEHOLDER


def _array_hit(array: re.Match[str]) -> Hit | None:
    """``"api_keys": ["a", "b"]``: every string in the list goes."""
    items = array.group("items")
    if all(is_non_secret_value(s) for s in _ITEM.findall(items)):
        return None
    out = _ITEM.sub(lambda s: f'"{s.group(1) if is_non_secret_value(s.group(1)) else PLACEHOLDER}"',
                    items)
    return array.start("items"), array.end("items"), out


def _key_value(text: str, p: int) -> Hit | None:
    """``KEY=value``, ``"key": "value"``, ``key := v``, ``'key' => 'v'`` at separator ``p``."""
    m = _KEY_REV.match(text[max(0, p - 68) : p][::-1])
    if m is None:
        return None
    key = m.group("key")[::-1].lstrip("-.")
    if text[p - m.end() - 1 : p - m.end()] in ("/", "\\"):  # /secret.key: a file's name
        return None
    if not (key_names_secret(key) or _named_secret(text, p - m.end(), key)
            or _odbc_password(text, p - m.end(), key)):
        return None
    start = p + 1
    follow = text[start : start + 1]
    if text[p] == ":" and follow == ":":  # auth::Token -- a scope, not a value
        return None
    if follow in ("=", ">"):  # :=  =>  ==
        start += 1
        if text[p : start] == "==" and _VERSION.match(text, start):
            return None  # a requirement (pkg-key==1.2.0) or a comparison with a number
    elif text[p] == "=" and follow in (" ", "\t") and text[p - 1 : p] not in (" ", "\t"):
        return None  # shell: "PASSWORD= next" assigns the empty string
    return _value_hit(text, start, key, text[p] == ":")


def _odbc_password(text: str, key_start: int, key: str) -> bool:
    """``Uid=sa;Pwd=...``: in a connection string PWD is a password, not a directory."""
    return key.lower() == "pwd" and text[key_start - 1 : key_start] == ";"


def _named_secret(text: str, key_start: int, key: str) -> bool:
    """``value`` whose sibling ``name``/``key`` names a secret."""
    if key.lower() != "value":
        return False
    named = _NAMED_BY.search(text, max(0, key_start - 160), key_start)
    return named is not None and key_names_secret(named.group("n"))


_TAG_REV: Final = re.compile(r"(?P<tag>[A-Za-z0-9_.:\-]{1,64}+)<")
_XML_VALUE: Final = re.compile(r"[^<\r\n]{1,8192}+(?=</)")  # <your-api-key> is no element


def _at_gt(text: str, p: int) -> Hit | None:
    """``<password>value</password>``: the tag's local name decides."""
    m = _TAG_REV.match(text[max(0, p - 66) : p][::-1])
    if m is None or not key_names_secret(m.group("tag")[::-1].rsplit(":", 1)[-1]):
        return None
    v = _XML_VALUE.match(text, p + 1)
    if v is None or is_non_secret_value(v.group()):
        return None
    return v.start(), v.end(), value_replacement(v.group())


RULES: Final[tuple[Rule, ...]] = (
    rule("colon", ":(?:" + _key_tail(":") + ")" + _NOT_REF, _key_value),
    rule("equals", "=(?:" + _key_tail("=") + ")" + _NOT_REF, _key_value),
    rule("xml", ">(?:" + gate(KEY_TAILS, True, ">") + "(?:" + by_length(KEY_TAILS, True, ">")
         + r"))(?=[^<\s])", _at_gt),
)
