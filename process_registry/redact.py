"""Secret redaction for command lines, live output, receipts, checkpoints and logs.

Public contract (CONTRACT.md and issue 5):

* :func:`redact_text` replaces every secret it recognises with ``[REDACTED]``,
  or, for vendor keys, keeps the vendor's fixed prefix for readability:
  ``sk-proj-...[REDACTED]``, ``ghp_...[REDACTED]``, ``eyJ...[REDACTED]``.
  Everything else stays byte-identical.  Redacting twice equals redacting once.
* :class:`StreamRedactor` does the same over a stream of chunks: a secret split
  across chunks is still redacted, and the concatenation of everything it
  returns equals ``redact_text`` of the whole input (for secrets no longer than
  :data:`~process_registry.redact_patterns.MAX_SECRET`).  Memory is bounded.
* :func:`redact_bytes` and :func:`redact_mapping` are conveniences on top.

What is recognised lives in :mod:`process_registry.redact_patterns`; this
module verifies candidates and assembles the output.  Decisions, with reasons:

* A key names a secret when its *last word* does: ``DB_PASSWORD=x`` and
  ``GITHUB_TOKEN=x`` are redacted, ``PASSWORD_MIN_LENGTH=8`` and
  ``token_type=bearer`` are not (their values are settings, not secrets).
* References are not secrets: ``TOKEN=$GITHUB_TOKEN`` (any value that starts
  with ``$NAME``, ``${`` or ``$(``), ``${{ secrets.X }}``, ``{{ vault_pw }}``
  and ``<your-token>`` are kept, as are empty values (``PASSWORD= next``),
  booleans/null and masks such as ``****``.
* Code and prose are not values: ``password = getpass()``,
  ``api_key = os.environ["X"]``, ``passwd: password updated successfully``.
* Unquoted values end at whitespace (shell semantics); ``Authorization`` and
  ``Cookie`` headers take the rest of the line, keeping the scheme word
  (``Authorization: Bearer [REDACTED]``).  Quoted values take the quotes' content.
* Not recognised (documented gaps): ``.netrc`` ``password x`` (space only),
  ``mysql -pSECRET``, ``curl -u user:pass``, unquoted values that start with a
  bracket, and vendor-less random strings outside a secret context (Vercel,
  Cloudflare, Mistral keys are caught only as ``VERCEL_TOKEN=...`` etc.).

Everything here is pure and thread-safe except a :class:`StreamRedactor`
instance, which belongs to one stream (one reader at a time).

Linear time: detectors start with a literal and never backtrack; every
verifier reads a bounded window, and a verifier that rejects after reading far
only ever reads a run no other candidate reads (see ``redact_patterns``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, TypeVar, cast

from process_registry.redact_patterns import (
    DETECTORS,
    MARKED,
    MAX_READ_AHEAD,
    MAX_READ_BEHIND,
    PLACEHOLDER,
    PLACEHOLDER_RE,
    Hit,
    is_non_secret_value,
    key_is_header,
    key_names_secret,
    looks_random,
    value_replacement,
    vendors_at,
)

__all__ = [
    "HOLD", "PLACEHOLDER", "StreamRedactor", "redact_bytes", "redact_mapping", "redact_text",
]

# ------------------------------------------------------------------ verifiers
# Each takes the text and the position of a detector hit and returns the span
# to replace or None.  Reading is bounded to MAX_READ_BEHIND before and
# MAX_READ_AHEAD after the anchor, which is what lets the stream cut safely.


def _vendor(text: str, p: int) -> Hit | None:
    for offset, length, prefixes in vendors_at(text[p]):
        start = p - offset
        vendor = prefixes.get(text[start : start + length]) if start >= 0 else None
        if vendor is None:
            continue
        m = vendor.exact.match(text, start)
        if m is None or (vendor.random and not looks_random(m.group("body"))):
            continue
        return m.start("body"), m.end("body"), MARKED
    return None


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
_REST_OF_LINE: Final = re.compile(r"""[^\r\n"'`]{1,8192}+""")
_SCHEME: Final = re.compile(
    r"(?i:bearer|basic|token|digest|bot|negotiate|ntlm|apikey|api-key|key|sso-key|ssws|oauth"
    r"|jwt|hawk|aws4-hmac-sha256|aws)[ \t]{1,8}+(?=\S)"
)


_PROSE: Final = re.compile(r"[a-z]{1,32}[ \t]+[a-z]")


def _value_hit(text: str, start: int, header: bool, colon: bool = False) -> Hit | None:
    """Find the value starting at ``start`` (after the separator) and decide on it."""
    m = _VALUE.match(text, start)
    if m is None:
        return None
    group = m.lastgroup or ""
    vs, ve = m.span(group)
    if PLACEHOLDER_RE.match(text, vs):  # already redacted: sk-...[REDACTED]
        return None
    if group == "bare":
        if header:  # Authorization: Bearer x / Cookie: a=1; b=2 -- the whole line
            rest = _REST_OF_LINE.match(text, vs)
            ve = vs + len(rest.group().rstrip()) if rest else ve
        # Code (key = getpass(), os.environ["X"]) or prose after a colon
        # ("passwd: password updated successfully") is not a value.
        elif text[ve : ve + 1] in ("(", "[") or (colon and _PROSE.match(text, vs)):
            return None
    if header or group != "bare":
        scheme = _SCHEME.match(text, vs, ve)
        if scheme is not None:
            vs = scheme.end()
    value = text[vs:ve]
    if is_non_secret_value(value):
        return None
    return vs, ve, value_replacement(value)


def _key_value(text: str, p: int) -> Hit | None:
    """``KEY=value``, ``"key": "value"``, ``key := v``, ``'key' => 'v'`` at separator ``p``."""
    m = _KEY_REV.match(text[max(0, p - 68) : p][::-1])
    if m is None:
        return None
    key = m.group("key")[::-1].lstrip("-.")
    if not key_names_secret(key):
        return None
    start = p + 1
    follow = text[start : start + 1]
    if text[p] == ":" and follow == ":":  # auth::Token -- a scope, not a value
        return None
    if follow in ("=", ">"):  # :=  =>  ==
        start += 1
    elif text[p] == "=" and follow in (" ", "\t") and text[p - 1 : p] not in (" ", "\t"):
        return None  # shell: "PASSWORD= next" assigns the empty string
    return _value_hit(text, start, key_is_header(key), text[p] == ":")


_USERINFO: Final = re.compile(
    r"""(?<=[A-Za-z0-9])://(?P<user>[^\s/?#@:"'<>]{0,256}+)(?::(?P<pw>[^\s/?#@"'<>]{0,256}+))?@"""
)
_TOKEN_RUN: Final = re.compile(r"[A-Za-z0-9_-]{20,256}")
# A bot id alone, or after "bot" as in https://api.telegram.org/bot<id>:<secret>/getMe
_TG_ID: Final = re.compile(r"(?:(?<![A-Za-z0-9_-])|(?<=bot))[0-9]{8,10}\Z")
_TG_SECRET: Final = re.compile(r"[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])")


def _userinfo(text: str, p: int) -> Hit | None:
    """``scheme://user:password@host``; also a bare token as the user name."""
    m = _USERINFO.match(text, p)
    if m is None:
        return None
    pw = m.group("pw")
    if pw is not None:
        return None if is_non_secret_value(pw) else (*m.span("pw"), value_replacement(pw))
    user = m.group("user")
    if _TOKEN_RUN.fullmatch(user) and looks_random(user):
        return (*m.span("user"), value_replacement(user))
    return None


def _at_colon(text: str, p: int) -> Hit | None:
    if text[p - 1 : p].isdigit() and _TG_ID.search(text, max(0, p - 11), p):
        m = _TG_SECRET.match(text, p + 1)  # Telegram bot token: the id stays
        if m is not None:
            return m.start(), m.end(), PLACEHOLDER
    return _key_value(text, p)


_CLI: Final = re.compile(
    r"""--(?P<flag>[A-Za-z][A-Za-z0-9-]{0,63}+)[ \t]{1,8}+"""
    r"""(?:"(?P<dq>[^"\r\n]{0,8192}+)"?|'(?P<sq>[^'\r\n]{0,8192}+)'?"""
    r"""|(?P<bare>[^\s"'`;&|<>(){}]{1,8192}+))"""
)


def _cli(text: str, p: int) -> Hit | None:
    """``--password VALUE`` (``--password=VALUE`` is a key-value pair)."""
    m = _CLI.match(text, p)
    if m is None or not key_names_secret(m.group("flag")):
        return None
    group = m.lastgroup or ""
    value = m.group(group)
    if (group == "bare" and value.startswith("-")) or is_non_secret_value(value):
        return None
    return (*m.span(group), value_replacement(value))


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


_PEM: Final = re.compile(
    r"(?<!-)-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?P<body>(?:[A-Za-z0-9+/=\s:,.\\]|-(?!----)){0,8192}+)"
    r"(?P<end>-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
)
_BEARER: Final = re.compile(
    r"(?<![A-Za-z0-9])Bearer[ \t]{1,8}+(?P<tok>[A-Za-z0-9._~+/-]{16,8192}+={0,8})"
)


def _trim(body: str, i: int, j: int) -> tuple[int, int]:
    """Shrink [i, j) past blanks and JSON ``\\n`` escapes at both ends."""
    while i < j and (body[i].isspace() or (body[i] == "\\" and body[i + 1 : i + 2] in ("n", "r"))):
        i += 1 if body[i].isspace() else 2
    while j > i and (body[j - 1].isspace() or (j - 2 >= i and body[j - 2 : j] in ("\\n", "\\r"))):
        j -= 1 if body[j - 1].isspace() else 2
    return i, j


def _pem(text: str, p: int) -> Hit | None:
    """Private key block: the BEGIN and END lines stay, the key material goes."""
    m = _PEM.match(text, p)
    if m is None:
        return None
    i, j = _trim(m.group("body"), 0, len(m.group("body")))
    return None if i >= j else (m.start("body") + i, m.start("body") + j, PLACEHOLDER)


def _bearer(text: str, p: int) -> Hit | None:
    m = _BEARER.match(text, p)
    if m is None or not looks_random(m.group("tok")):
        return None
    return m.start("tok"), m.end("tok"), value_replacement(m.group("tok"))


_JWT: Final = re.compile(
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,1024}+\.ey[A-Za-z0-9_-]{8,8192}+"
    r"(?:\.[A-Za-z0-9_-]{0,1024}+)?"
)


def _jwt(text: str, p: int) -> Hit | None:
    m = _JWT.match(text, p - 2)
    return None if m is None else (p + 1, m.end(), MARKED)


_BY_NAME: Final[dict[str, Callable[[str, int], Hit | None]]] = {
    "vendor": _vendor, "colon": _at_colon, "userinfo": _userinfo, "equals": _key_value,
    "xml": _at_gt, "cli": _cli, "pem": _pem, "bearer": _bearer, "jwt": _jwt,
}
_VERIFIERS: Final = tuple(_BY_NAME[name] for name, _ in DETECTORS)
_PATTERNS: Final = tuple(detector for _, detector in DETECTORS)
_SHIFT: Final = 5  # candidates are encoded as position << _SHIFT | detector index
assert len(DETECTORS) < 1 << _SHIFT

# --------------------------------------------------------------------- engine


def _scan(text: str, start: int, limit: int) -> tuple[list[str], int]:
    """Redact ``text[start:]`` up to ``limit``; return the pieces and where they end.

    Spans are accepted left to right, first anchor first; a span that starts
    before ``limit`` is taken whole, so the returned end is ``max(limit, last
    span end)``.  Anchors at or past ``limit`` are left for a later call.
    """
    found: list[int] = []
    for index, detector in enumerate(_PATTERNS):
        # One literal-prefixed pass per detector: C-speed skipping to candidates.
        found.extend(m.start() << _SHIFT | index for m in detector.finditer(text, start))
    found.sort()
    pieces: list[str] = []
    pos = start
    for code in found:
        p = code >> _SHIFT
        if p >= limit:
            break
        if p < pos:  # inside a span already replaced (or its kept prefix)
            continue
        hit = _VERIFIERS[code & ((1 << _SHIFT) - 1)](text, p)
        if hit is None or hit[0] < pos:
            continue
        s, e, replacement = hit
        pieces.append(text[pos:s])
        pieces.append(replacement)
        pos = e
    end = max(pos, limit)
    pieces.append(text[pos:end])
    return pieces, end


def redact_text(text: str) -> str:
    """Return ``text`` with every recognised secret replaced (see module docstring).

    Pure and idempotent: ``redact_text(redact_text(t)) == redact_text(t)``.
    Runs in time linear in ``len(text)`` whatever the input.
    """
    pieces, _ = _scan(text, 0, len(text))
    return pieces[0] if len(pieces) == 1 else "".join(pieces)


def redact_bytes(data: bytes) -> bytes:
    """``redact_text`` for bytes.

    Decodes UTF-8 with ``surrogateescape`` and encodes back the same way, so
    bytes that are not valid UTF-8 (binary output, latin-1 files) come back
    unchanged; only recognised (ASCII) secrets are replaced.
    """
    return redact_text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


_J = TypeVar("_J")


def redact_mapping(obj: _J) -> _J:
    """Return a redacted copy of a JSON-like value (dicts, lists, tuples, scalars).

    Every string (keys included) goes through :func:`redact_text`.  Under a key
    that names a secret (``password``, ``api_key``, ``client_secret``,
    ``Authorization``, ... see ``key_names_secret``) every string and number
    below it becomes a placeholder, except references and booleans/null.
    The input is not modified.
    """
    return cast(_J, _walk(obj, False))


def _walk(obj: object, secret: bool) -> object:
    if isinstance(obj, str):
        if secret and not is_non_secret_value(obj):
            return value_replacement(obj)
        return redact_text(obj)
    if isinstance(obj, bytes | bytearray):
        return PLACEHOLDER.encode() if secret and obj else redact_bytes(bytes(obj))
    if isinstance(obj, Mapping):
        return {
            (redact_text(k) if isinstance(k, str) else k): _walk(
                v, secret or (isinstance(k, str) and key_names_secret(k))
            )
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_walk(v, secret) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_walk(v, secret) for v in obj)
    if secret and isinstance(obj, int | float) and not isinstance(obj, bool):
        return PLACEHOLDER
    return obj


# ------------------------------------------------------------------ streaming

#: Past this many characters without a line break, output is cut by length.
HOLD: Final = 16_384
_CONTEXT: Final = 128  # emitted characters kept for look-behinds
_PEM_RECHECK: Final = 512  # wait for this much more data before re-checking a key block
assert HOLD > MAX_READ_AHEAD + 256 and _CONTEXT > MAX_READ_BEHIND


def _pem_settled(buf: str, p: int) -> bool:
    """Whether the private-key block starting at ``p`` reads no further than ``buf``."""
    m = _PEM.match(buf, p)
    if m is None:  # header incomplete, or complete and not a private key
        return p + 96 <= len(buf) or "\n" in buf[p : p + 96]
    return m.group("end") is not None or m.end() + 128 <= len(buf)


def _safe_cut(buf: str, start: int) -> tuple[int, bool]:
    """Largest position before which every decision is final, and whether an
    open private key block is what limits it."""
    size = len(buf)
    brk = max(buf.rfind("\n", start), buf.rfind("\r", start))
    # Anchors more than HOLD before the end read only text that is here;
    # anchors before a line break read only their own line...
    cut = max(brk + 1 if brk >= 0 else start, size - HOLD, start)
    # ...except a private key block, the one secret that spans lines.
    q = buf.find("-----BEGIN", max(start, size - HOLD))
    while 0 <= q < cut:
        if not _pem_settled(buf, q):
            return q, True
        q = buf.find("-----BEGIN", q + 1)
    return cut, False


class StreamRedactor:
    """Incremental :func:`redact_text` for output that arrives in chunks.

    ``feed(chunk)`` returns the redacted text that is now final; ``flush()``
    returns the rest and resets the redactor for a new stream.  Joining every
    returned piece equals ``redact_text`` of the joined input.

    What is held back: the partial last line (no secret but a private key block
    spans a line break, so complete lines are final), an open private key
    block, and -- for a line longer than :data:`HOLD` -- only its last ``HOLD``
    characters.  So memory stays under about ``2 * HOLD`` plus one chunk, and a
    prompt without a newline (``Password: ``) appears only with the next line
    or at ``flush()``.
    """

    def __init__(self) -> None:
        self._context = ""  # already emitted, kept for look-behinds
        self._held = ""  # not yet emitted
        self._wait = 0  # skip draining until _held is at least this long

    @property
    def pending(self) -> int:
        """Number of characters held back, not yet returned."""
        return len(self._held)

    def feed(self, chunk: str) -> str:
        """Add ``chunk``; return the redacted text that can no longer change."""
        self._held += chunk
        size = len(self._held)
        if size < self._wait or (size < 2 * HOLD and "\n" not in chunk and "\r" not in chunk):
            return ""  # nothing new can have become final; keep cost O(chunk)
        return self._drain(final=False)

    def flush(self) -> str:
        """Return everything still held, redacted, and start a new stream."""
        out = self._drain(final=True)
        self._context, self._held, self._wait = "", "", 0
        return out

    def _drain(self, final: bool) -> str:
        buf = self._context + self._held
        start = len(self._context)
        cut, pem_open = (len(buf), False) if final else _safe_cut(buf, start)
        if cut > start:
            pieces, end = _scan(buf, start, cut)
            self._context = buf[max(0, end - _CONTEXT) : end]
            self._held = buf[end:]
        # An open key block decides nothing new until more of it has arrived.
        self._wait = len(self._held) + _PEM_RECHECK if pem_open else 0
        return "".join(pieces) if cut > start else ""

