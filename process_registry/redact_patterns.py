"""What a secret looks like: the recogniser tables behind :mod:`process_registry.redact`.

``redact.py`` owns *how* text is scanned and assembled; this module owns *what*
is recognised: the vendor table, the rules for key names and values, and the
detectors built from them.

Two layers keep the common case fast:

* **Detectors** (:data:`DETECTORS`) -- a handful of compiled regexes, each
  starting with a literal (``-``, ``_``, ``.``, ``:``, ``=``, ``://``,
  ``-----BEGIN``, ``Bearer``, ``AKIA``...), so CPython's ``re`` jumps between
  occurrences in a tight C loop; the checks after the literal are fixed-width
  look-arounds, cheapest first.  A detector is a *superset* filter: on real
  output only a tiny share of positions survive it.  Its matches never overlap
  each other, so the set it finds does not depend on where a search starts --
  which is what lets streaming give the same answer as one pass.
* **Verifiers** (in ``redact.py``) apply the exact rules at each surviving
  position, using the tables and functions here.

Every quantifier is bounded and, where a run is consumed, possessive: nothing
backtracks.  Vendor candidates must start a token run, so runs read by
rejected candidates never overlap; together this keeps a scan linear in the
input whatever it is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

PLACEHOLDER: Final = "[REDACTED]"
#: Appended after a kept, non-secret vendor prefix: ``sk-proj-...[REDACTED]``.
MARKED: Final = "..." + PLACEHOLDER

#: Longest secret value/body redacted in one piece (chars).  Longer runs are
#: pathological; their first MAX_SECRET chars are redacted.
MAX_SECRET: Final = 8192
#: Furthest any verifier reads past its anchor (JWT: 1024 + 8192 + 1024 + dots).
MAX_READ_AHEAD: Final = 10_400
#: Furthest any detector or verifier reads *before* its anchor.
MAX_READ_BEHIND: Final = 96

Hit = tuple[int, int, str]  # (start, end, replacement) of the text to replace

_TOK: Final = "A-Za-z0-9_-"  # characters of a token run (for boundaries)


@dataclass(frozen=True)
class Vendor:
    """A vendor-prefixed credential: the prefix is shown, the body replaced."""

    name: str
    prefixes: tuple[str, ...]  # literal prefixes, used to build the detectors
    exact: re.Pattern[str]  # matched at the prefix start; groups ``keep`` and ``body``
    random: bool  # body must look random (has a digit, or both letter cases)


def _vendor(
    name: str, prefixes: tuple[str, ...], keep: str, body: str, *, fixed: bool = False,
    random: bool = False,
) -> Vendor:
    # The left boundary stops "task-..." from matching "sk-" and keeps every
    # candidate at the start of its token run, so runs read by rejected
    # candidates never overlap.  ``fixed`` bodies (exact length) also need a
    # right boundary; run bodies are possessive and stop at the run's end.
    tail = "(?![A-Za-z0-9])" if fixed else ""
    exact = re.compile(rf"(?<![{_TOK}])(?P<keep>{keep})(?P<body>{body}){tail}")
    return Vendor(name, prefixes, exact, random)


_GITLAB = ("pat", "dt", "rt", "rtr", "ptt", "cbt", "imt", "ft", "soat", "oas", "agent", "wt",
           "ffct")
_SLACK = "abposre"

VENDORS: Final[tuple[Vendor, ...]] = (
    # OpenAI, Anthropic (api, admin, oauth), OpenRouter, DeepSeek & other sk- clones.
    _vendor("openai-anthropic", ("sk-",),
            r"sk-(?:ant-(?:api|admin|oat|sid)\d\d-|ant-|proj-|svcacct-|admin-|or-v1-|None-)?",
            r"[A-Za-z0-9_-]{20,8192}+", random=True),
    _vendor("github", tuple(f"gh{c}_" for c in "pousr"), r"gh[pousr]_", r"[A-Za-z0-9]{30,255}+"),
    _vendor("github-fine-grained", ("github_pat_",), "github_pat_", r"[A-Za-z0-9_]{20,255}+"),
    _vendor("gitlab", tuple(f"gl{k}-" for k in _GITLAB), rf"gl(?:{'|'.join(_GITLAB)})-",
            r"[A-Za-z0-9_-]{20,255}+"),
    _vendor("slack", (*(f"xox{c}-" for c in _SLACK), "xapp-"),
            rf"xox[{_SLACK}]-|xapp-", r"[A-Za-z0-9-]{10,255}+"),
    _vendor("slack-webhook", ("hooks.slack.com/",),
            r"hooks\.slack\.com/(?:services|workflows|triggers)/", r"[A-Za-z0-9/_-]{20,255}+"),
    _vendor("discord-webhook", ("discord.com/", "discordapp.com/"),
            r"discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/", r"[A-Za-z0-9_-]{20,255}+"),
    _vendor("aws-access-key-id", ("AKIA", "ASIA", "ABIA", "ACCA"), r"A(?:KIA|SIA|BIA|CCA)",
            r"[A-Z0-9]{16}", fixed=True),
    _vendor("google-api-key", ("AIza",), "AIza", r"[A-Za-z0-9_-]{35}", fixed=True),
    _vendor("google-oauth-secret", ("GOCSPX-",), "GOCSPX-", r"[A-Za-z0-9_-]{20,64}+"),
    _vendor("google-oauth-token", ("ya29.",), r"ya29\.", r"[A-Za-z0-9_-]{20,4096}+"),
    _vendor("stripe", tuple(f"{a}_{b}_" for a in ("sk", "rk", "pk") for b in ("live", "test")),
            r"[srp]k_(?:live|test)_", r"[A-Za-z0-9]{10,255}+"),
    _vendor("stripe-webhook", ("whsec_",), "whsec_", r"[A-Za-z0-9]{20,255}+"),
    _vendor("huggingface", ("hf_", "api_org_"), "hf_|api_org_", r"[A-Za-z0-9]{30,255}+"),
    _vendor("npm", ("npm_",), "npm_", r"[A-Za-z0-9]{36,255}+"),
    _vendor("pypi", ("pypi-",), "pypi-", r"Ag[A-Za-z0-9_-]{50,4096}+"),
    _vendor("sendgrid", ("SG.",), r"SG\.", r"[A-Za-z0-9_-]{16,32}+\.[A-Za-z0-9_-]{16,64}+"),
    _vendor("digitalocean", ("dop_v1_", "doo_v1_", "dor_v1_"), r"do[por]_v1_", r"[a-f0-9]{64}",
            fixed=True),
    _vendor("twilio-key", ("SK",), "SK", r"[0-9a-fA-F]{32}", fixed=True),
    _vendor("twilio-account", ("AC",), "AC", r"[0-9a-f]{32}", fixed=True),
    _vendor("groq", ("gsk_",), "gsk_", r"[A-Za-z0-9]{40,255}+"),
    _vendor("replicate", ("r8_",), "r8_", r"[A-Za-z0-9]{30,255}+"),
    _vendor("perplexity", ("pplx-",), "pplx-", r"[A-Za-z0-9]{40,255}+"),
    _vendor("fireworks", ("fw_",), "fw_", r"[A-Za-z0-9]{20,255}+", random=True),
    _vendor("xai", ("xai-",), "xai-", r"[A-Za-z0-9]{40,255}+"),
    _vendor("langsmith", ("lsv2_pt_", "lsv2_sk_"), r"lsv2_(?:pt|sk)_",
            r"[a-f0-9]{32}_[a-f0-9]{10}", fixed=True),
    _vendor("databricks", ("dapi",), "dapi", r"[a-f0-9]{32}(?:-[0-9])?", fixed=True),
    _vendor("shopify", ("shpat_", "shpss_", "shpca_", "shppa_"), r"shp(?:at|ss|ca|pa)_",
            r"[a-fA-F0-9]{32}", fixed=True),
    _vendor("square", ("sq0atp-", "sq0csp-"), r"sq0(?:atp|csp)-", r"[A-Za-z0-9_-]{22,64}+"),
    _vendor("square-access", ("EAAA",), "EAAA", r"[A-Za-z0-9_-]{60,255}+"),
    _vendor("mailgun", ("key-",), "key-", r"[a-f0-9]{32}", fixed=True),
    _vendor("atlassian", ("ATATT3",), "ATATT3", r"[A-Za-z0-9_=-]{100,512}+"),
    _vendor("heroku", ("HRKU-",), "HRKU-", r"[A-Za-z0-9_-]{30,255}+"),
    _vendor("linear", ("lin_api_", "lin_oauth_"), r"lin_(?:api|oauth)_", r"[A-Za-z0-9]{30,255}+"),
    _vendor("notion", ("secret_", "ntn_"), "secret_|ntn_", r"[A-Za-z0-9]{40,255}+", random=True),
    _vendor("doppler", tuple(f"dp.{k}." for k in ("pt", "st", "sa", "ct", "scim", "audit")),
            r"dp\.(?:pt|st|sa|ct|scim|audit)\.", r"[A-Za-z0-9]{40,255}+"),
    _vendor("supabase", ("sbp_", "sb_secret_"), "sbp_|sb_secret_", r"[A-Za-z0-9_-]{30,255}+"),
    _vendor("postman", ("PMAK-",), "PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}", fixed=True),
    _vendor("newrelic", ("NRAK-",), "NRAK-", r"[A-Z0-9]{27}", fixed=True),
    _vendor("sentry", ("sntrys_", "sntryu_"), r"sntry[su]_", r"[A-Za-z0-9+/=_]{40,512}+"),
    _vendor("grafana", ("glc_", "glsa_"), "glc_|glsa_", r"[A-Za-z0-9+/=_]{32,512}+"),
    _vendor("tailscale", ("tskey-",), "tskey-", r"[A-Za-z0-9-]{20,255}+"),
    _vendor("pulumi", ("pul-",), "pul-", r"[a-f0-9]{40}", fixed=True),
    _vendor("vault", ("hvs.", "hvb.", "hvr."), r"hv[sbr]\.", r"[A-Za-z0-9_-]{24,512}+"),
    _vendor("age", ("AGE-SECRET-KEY-",), "AGE-SECRET-KEY-", r"1[0-9A-Z]{58}", fixed=True),
    _vendor("figma", ("figd_",), "figd_", r"[A-Za-z0-9_-]{30,255}+"),
    _vendor("dynatrace", ("dt0c01.",), r"dt0c01\.", r"[A-Z0-9]{24}\.[A-Z0-9]{64}", fixed=True),
    _vendor("mapbox", ("sk.",), r"sk\.", r"eyJ[A-Za-z0-9_-]{20,1024}+\.[A-Za-z0-9_-]{20,255}+"),
    _vendor("jfrog", ("AKCp",), "AKCp", r"[A-Za-z0-9]{60,100}+"),
    _vendor("docker-hub", ("dckr_pat_",), "dckr_pat_", r"[A-Za-z0-9_-]{20,255}+"),
    _vendor("planetscale", ("pscale_tkn_", "pscale_pw_", "pscale_oauth_"),
            r"pscale_(?:tkn|pw|oauth)_", r"[A-Za-z0-9_.-]{30,255}+"),
    _vendor("netlify", ("nfp_",), "nfp_", r"[A-Za-z0-9]{30,255}+"),
    _vendor("render", ("rnd_",), "rnd_", r"[A-Za-z0-9]{30,255}+"),
    _vendor("buildkite", ("bkua_",), "bkua_", r"[a-f0-9]{40}", fixed=True),
)

# ---------------------------------------------------------------- key names
#: Last word of a key that makes its value a secret.
_SECRET_WORDS: Final = frozenset({
    "password", "passwd", "passphrase", "pass", "secret", "token", "auth", "authorization",
    "credential", "credentials", "cookie", "apikey", "sig", "pat", "privatekey", "secretkey",
    "accesskey",
})
#: ``<qualifier>_key`` names a secret; a bare ``key`` (or ``sort_key``) does not.
_KEY_QUALIFIERS: Final = frozenset({
    "api", "access", "secret", "private", "signing", "sign", "encryption", "encrypt",
    "decryption", "master", "account", "app", "auth", "client", "consumer", "session",
    "storage", "subscription", "webhook", "hmac", "jwt", "license", "service", "admin",
    "shared", "root", "crypto", "cipher",
})
#: A single glued word ending like this is a secret too: PGPASSWORD, csrftoken.
_SECRET_SUFFIXES: Final = ("password", "passwd", "passphrase", "secret", "token", "apikey",
                           "credential", "credentials")
_WORD_RE: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_SPLIT_RE: Final = re.compile(r"[^A-Za-z0-9]+")


def key_words(key: str) -> list[str]:
    """Split ``DB_PASSWORD``, ``dbPassword``, ``x-api-key`` into lower-case words."""
    words = [w.lower() for part in _SPLIT_RE.split(key) for w in _WORD_RE.findall(part)]
    while words and words[-1].isdigit():  # TOKEN2, password_1: the digits are a counter
        words.pop()
    return words


@functools.lru_cache(maxsize=4096)  # real output repeats the same few keys
def key_names_secret(key: str) -> bool:
    """True when ``key`` names a secret: its *last* word says so.

    ``GITHUB_TOKEN``, ``db_password``, ``clientSecret``, ``x-api-key``,
    ``aws_secret_access_key``, ``PGPASSWORD`` name secrets;
    ``PASSWORD_MIN_LENGTH``, ``token_type``, ``max_tokens``, ``sort_key``,
    ``PWD``/``OLDPWD`` (the shell's working directory) do not.
    """
    words = key_words(key)
    if not words:
        return False
    last = words[-1]
    if last == "pwd":  # MYSQL_PWD yes, the shell's PWD / OLDPWD no
        return len(words) > 1
    if last in _SECRET_WORDS:
        return True
    if last == "key":
        return len(words) > 1 and words[-2] in _KEY_QUALIFIERS
    if last == "base":  # Rails SECRET_KEY_BASE
        return words[-3:-1] == ["secret", "key"]
    return last.endswith(_SECRET_SUFFIXES)


@functools.lru_cache(maxsize=1024)
def key_is_header(key: str) -> bool:
    """``Authorization`` / ``Cookie``: an unquoted value is the whole rest of the line."""
    words = key_words(key)
    return bool(words) and words[-1] in ("authorization", "cookie")


# ------------------------------------------------------------ value checks
_REFERENCE_RE: Final = re.compile(
    r"\$[A-Za-z_][A-Za-z0-9_]*|\$\{[^{}\s]{1,256}\}|\$\{\{.{0,256}\}\}|\$\(.{0,256}\)"
    r"|\{\{.{0,256}\}\}|%[A-Za-z_][A-Za-z0-9_]*%|<[^<>]{0,256}>"
)
_NON_SECRET_WORDS: Final = frozenset({"true", "false", "null", "none", "nil", "undefined"})
_MASK_RE: Final = re.compile(r"[*•]{1,64}|[xX]{3,64}|[.#-]{1,3}|\**\[REDACTED\]\**")
#: Our own output, so that redacting twice changes nothing.
PLACEHOLDER_RE: Final = re.compile(r"(?:[A-Za-z0-9_.:/-]{0,40}\.\.\.)?\[REDACTED\]")
_HAS_DIGIT: Final = re.compile(r"[0-9]")
_HAS_UPPER: Final = re.compile(r"[A-Z]")
_HAS_LOWER: Final = re.compile(r"[a-z]")


def looks_random(body: str) -> bool:
    """Random-looking: has a digit, or both letter cases (kebab-case words are not)."""
    if _HAS_DIGIT.search(body):
        return True
    return bool(_HAS_UPPER.search(body) and _HAS_LOWER.search(body))


def is_non_secret_value(value: str) -> bool:
    """Values kept as they are: empty, ``$VAR``/``${VAR}``/``{{ x }}`` references,
    booleans/null, masks like ``****`` and our own placeholders (idempotence)."""
    v = value.strip()
    if not v:
        return True
    # Cheap first-character tests keep the common (secret) case to a few checks.
    return (
        (len(v) < 10 and v.lower() in _NON_SECRET_WORDS)
        or (v[0] in "$%{<" and _REFERENCE_RE.fullmatch(v) is not None)
        or (v[0] in "*•x.#-[" and _MASK_RE.fullmatch(v) is not None)
        or ("[REDACTED]" in v and PLACEHOLDER_RE.fullmatch(v) is not None)
    )


def _prefixes() -> Iterator[tuple[str, Vendor]]:
    for vendor in VENDORS:
        for prefix in vendor.prefixes:
            yield prefix, vendor


_ANY_PREFIX: Final = re.compile(
    "|".join(sorted({re.escape(p) for p, _ in _prefixes()}, key=len, reverse=True))
)


def value_replacement(value: str) -> str:
    """Placeholder for a whole secret value: keeps a vendor prefix when it has one."""
    if _ANY_PREFIX.match(value) is None:  # one regex instead of ~60 in the common case
        return PLACEHOLDER
    for vendor in dict.fromkeys(v for p, v in _prefixes() if p[0] == value[0]):
        m = vendor.exact.match(value)
        if m is not None:
            return m.group("keep") + MARKED
    return PLACEHOLDER


# --------------------------------------------------------------- detectors
# Cost model (CPython ``re``): a pattern that starts with a literal is found
# with a tight C loop; each position that loop stops at costs a match call
# (~40 ns).  So every detector starts with a literal, and the first check after
# it is a cheap two-character class look-behind that rejects most stops.


def _ci(word: str) -> str:
    """Case-insensitive literal as character classes (cheaper in ``re`` than (?i))."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


def _chars(chars: set[str], fold: bool) -> str:
    both = {x for c in chars for x in ((c.lower(), c.upper()) if fold else (c,))}
    return "[" + "".join(re.escape(c) for c in sorted(both)) + "]"


def _gate(words: list[str], fold: bool, suffix: str = "", width: int = 2) -> str:
    """Look-behind: the last ``width`` characters before ``suffix`` could end a word."""
    classes = "".join(_chars({w[-i] for w in words}, fold) for i in range(width, 0, -1))
    return f"(?<={classes}{suffix})"


def _by_length(words: list[str], fold: bool, suffix: str = "", boundary: bool = False) -> str:
    """Exact look-behinds, one per word length (``re`` needs fixed width).

    With ``boundary`` the word must also start a token run, so "sk-sk-sk-..."
    yields one candidate, not one per repetition."""
    render = _ci if fold else re.escape
    groups: dict[int, list[str]] = {}
    for w in words:
        groups.setdefault(len(w), []).append(w)
    return "|".join(
        "(?<=(?:" + "|".join(render(w) for w in ws) + ")" + suffix + ")"
        + (f"(?<![{_TOK}][\\s\\S]{{{n}}})" if boundary else "")
        for n, ws in sorted(groups.items())
    )


def _anchor_index(prefix: str) -> int:
    """Where a prefix is anchored: its last separator, which is rarer than letters."""
    return max(0, max(prefix.rfind(c) for c in "-_."))


#: Last words of secret key names as they end right before ``=``/``:``.
KEY_TAILS: Final = ["password", "passwd", "passphrase", "pass", "pwd", "secret", "token", "auth",
                    "authorization", "credential", "credentials", "cookie", "key", "sig", "pat",
                    "base"]
#: Between a key and its separator: closing quote/bracket, JSON escape, blanks.
_FILL: Final = r"""[\]"'\\ \t]"""
MAX_FILLER: Final = 3
# TOKEN=$GITHUB_TOKEN, password: ${DB_PASSWORD}: a reference, never a candidate.
_NOT_REF: Final = r"""(?![ \t]{0,32}+["']?\$[A-Za-z_{(])"""


def _key_tail(suffix: str, fillers: int = 0) -> str:
    """Key word, then ``fillers`` filler chars, then ``suffix``; nested so each
    extra filler is checked only when the one before it is there."""
    tail = _FILL * fillers + re.escape(suffix)
    here = f"{_gate(KEY_TAILS, True, tail, 3)}(?:{_by_length(KEY_TAILS, True, tail)})"
    if fillers == MAX_FILLER:
        return here
    deeper = f"(?<={_FILL}{tail})(?:{_key_tail(suffix, fillers + 1)})"
    return f"{here}|{deeper}"


def _vendor_detectors() -> list[tuple[str, str]]:
    ends: dict[str, list[str]] = {}  # anchor -> prefixes ending with it (sk-, ghp_)
    mids: dict[str, list[str]] = {}  # anchor -> (look-behind, look-ahead) alternatives
    starts: dict[str, list[str]] = {}  # first char -> prefixes anchored there (AKIA)
    for prefix, _ in _prefixes():
        i = _anchor_index(prefix)
        if i == len(prefix) - 1:
            ends.setdefault(prefix[i], []).append(prefix)
        elif i == 0:
            starts.setdefault(prefix[0], []).append(prefix)
        else:
            mids.setdefault(prefix[i], []).append(prefix)
    out = []
    for anchor in sorted(ends.keys() | mids.keys()):
        end, mid = ends.get(anchor, []), mids.get(anchor, [])
        alts = []
        if end:  # a body of at least 8 token characters must follow
            alts.append(f"(?=[A-Za-z0-9_+/=-]{{8}})(?:{_by_length(end, False, boundary=True)})")
        for m in mid:  # hooks.slack.com/: anchored on its last dot
            i = _anchor_index(m) + 1
            lead, rest = re.escape(m[:i]), re.escape(m[i:])
            alts.append(f"(?<={lead})(?<![{_TOK}][\\s\\S]{{{i}}})(?={rest})")
        gate = _gate([m[: _anchor_index(m)] for m in end + mid], False, re.escape(anchor))
        out.append(("vendor", f"{re.escape(anchor)}{gate}(?:{'|'.join(alts)})"))
    for first, prefixes in sorted(starts.items()):
        body = "[A-Za-z0-9_-]{8}"
        if len(prefixes) == 1 and not _self_overlaps(prefixes[0]):  # dapi, EAAA: whole literal
            lit = prefixes[0]
            out.append(("vendor", f"{re.escape(lit)}(?<![{_TOK}]{re.escape(lit)})(?={body})"))
        else:
            rest = "|".join(re.escape(x[1:]) for x in prefixes)
            out.append(("vendor", f"{re.escape(first)}(?<![{_TOK}]{re.escape(first)})"
                                  f"(?=(?:{rest}){body})"))
    return out


def _self_overlaps(literal: str) -> bool:
    """Whether two occurrences of ``literal`` can overlap (then finditer could skip one)."""
    return any(literal.endswith(literal[:k]) for k in range(1, len(literal)))


def _build_detectors() -> tuple[tuple[str, re.Pattern[str]], ...]:
    specs = [
        *_vendor_detectors(),
        # key: value, Telegram 123456789:<35>  (each look-around costs: cheapest first)
        ("colon", ":(?:(?:" + _key_tail(":") + ")" + _NOT_REF
                  + r"|(?<=[0-9]:)(?=[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])))"),
        ("userinfo", r"://(?=[^\s/?#@]{1,256}+@)"),  # scheme://user:password@host
        ("equals", "=(?:" + _key_tail("=") + ")" + _NOT_REF),
        ("xml", ">(?:" + _gate(KEY_TAILS, True, ">") + "(?:" + _by_length(KEY_TAILS, True, ">")
                + r"))(?=[^<\s])"),
        # --password VALUE (the --password=VALUE form is the "equals" detector's)
        ("cli", r"""--(?<![^\s"'(]--)(?=(?:[A-Za-z0-9]{1,32}+-){0,6}(?:"""
                + "|".join(KEY_TAILS) + r")[ \t]{1,8}+[^\s-])"),
        ("pem", r"-----BEGIN(?=[ A-Z0-9]{0,40}PRIVATE KEY)"),
        ("bearer", r"Bearer(?=[ \t]{1,8}+[A-Za-z0-9._~+/-]{16})"),
        ("jwt", r"J(?<=eyJ)(?<![A-Za-z0-9_-]eyJ)(?=[A-Za-z0-9_-]{8})"),
    ]
    return tuple((name, re.compile(pattern)) for name, pattern in specs)


#: (verifier name, detector).  A detector starts with a literal and its matches
#: never overlap one another, so ``finditer`` from any start position finds
#: every candidate at or after it -- the property streaming relies on.
DETECTORS: Final = _build_detectors()

# anchor char -> ((offset of the anchor in the prefix, prefix length, {prefix: vendor}), ...)
_VENDORS_AT: Final[dict[str, tuple[tuple[int, int, dict[str, Vendor]], ...]]] = {}


def _index_vendors() -> None:
    shapes: dict[str, dict[tuple[int, int], dict[str, Vendor]]] = {}
    for prefix, vendor in _prefixes():
        i = _anchor_index(prefix)
        shapes.setdefault(prefix[i], {}).setdefault((i, len(prefix)), {})[prefix] = vendor
    for anchor, by_shape in shapes.items():
        _VENDORS_AT[anchor] = tuple((i, n, d) for (i, n), d in sorted(by_shape.items()))


_index_vendors()


def vendors_at(anchor: str) -> tuple[tuple[int, int, dict[str, Vendor]], ...]:
    """Prefixes anchored on ``anchor``, grouped by (anchor offset, prefix length)."""
    return _VENDORS_AT.get(anchor, ())
