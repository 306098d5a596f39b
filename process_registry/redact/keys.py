"""Which key names name a secret: ``DB_PASSWORD``, ``apiKey``, ``x-auth-token``, ``FAL_KEY``.

A key names a secret when its *last word* does: ``GITHUB_TOKEN=x`` and
``db_password: x`` are secrets, ``PASSWORD_MIN_LENGTH=8`` and
``token_type=bearer`` are not (their values are settings).  Words are split at
separators and case changes, so ``dbPassword``, ``DB_PASSWORD``,
``db.password`` and ``x-db-password`` are one name.
"""

from __future__ import annotations

import functools
import re
from typing import Final

#: Last word of a key that makes its value a secret.
_SECRET_WORDS: Final = frozenset({
    "password", "passwd", "passphrase", "pass", "secret", "token", "auth", "authorization",
    "credential", "credentials", "cookie", "apikey", "sig", "signature", "pat", "privatekey",
    "secretkey", "accesskey", "bearer", "mnemonic", "secrets", "passwords", "passphrases",
    "apikeys", "privatekeys",
})
#: ``<qualifier>_key`` is *not* a secret for these qualifiers (keys of data, not of locks);
#: ``FAL_KEY``, ``openai_key``, ``STRIPE_KEY`` -- any other qualifier -- are.
_DATA_KEY_QUALIFIERS: Final = frozenset({
    "sort", "public", "pub", "primary", "foreign", "partition", "range", "hash", "cache",
    "idempotency", "dedup", "dedupe", "lookup", "map", "dict", "index", "unique", "composite",
    "surrogate", "natural", "row", "column", "group", "shard", "routing", "object", "s3",
    "bucket", "file", "redis", "lock", "state", "translation", "i18n", "message", "label",
    "config", "setting", "settings", "env", "name", "field", "attr", "attribute", "property",
    "item", "list", "node", "element", "react", "meta", "json", "yaml", "next", "prev", "last",
    "first", "start", "end", "hot", "short", "long", "tracking", "verify", "verifying",
    "recipient", "host", "known", "kms", "id", "dns", "registry", "query", "search", "sub",
    "parent", "child", "value", "data", "tab", "enter", "escape", "shift", "control", "ctrl",
    "alt", "option", "command", "cmd", "fn", "function",
})
#: Words before the last that make ``..._value``/``..._data``/``..._material`` a secret too
#: (and ``key``, when that key names a secret: ``client-key-data``, ``key_material``).
_SECRET_BEFORE: Final = frozenset({
    "password", "passwd", "passphrase", "secret", "token", "credential", "credentials",
    "apikey", "privatekey",
})
#: A single glued word ending like this is a secret too: PGPASSWORD, csrftoken.
_SECRET_SUFFIXES: Final = ("password", "passwd", "passphrase", "secret", "token", "apikey",
                           "credential", "credentials", "secrets", "passwords")
#: Wallet recovery phrases: SEED_PHRASE, recovery_words, secret_recovery_phrase.
_PHRASE_WORDS: Final = frozenset({"phrase", "words"})
_PHRASE_BEFORE: Final = frozenset({"seed", "recovery", "mnemonic", "secret", "wallet", "backup"})
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
    ``aws_secret_access_key``, ``PGPASSWORD``, ``FAL_KEY``, ``API_KEYS``,
    ``DB_PW``, ``client-key-data``, ``private_key_id``, ``SEED_PHRASE`` name
    secrets; ``PASSWORD_MIN_LENGTH``, ``token_type``, ``max_tokens``,
    ``sort_key``, ``public_key``, ``access_key_id``, ``PWD``/``OLDPWD`` (the
    shell's working directory) do not.
    """
    words = key_words(key)
    if not words:
        return False
    last, before = words[-1], words[-2] if len(words) > 1 else ""
    if last in ("pwd", "pw"):  # MYSQL_PWD, DB_PW yes; the shell's PWD / OLDPWD no
        return bool(before)
    if last in _SECRET_WORDS:
        return True
    if last in ("key", "keys"):
        return bool(before) and before not in _DATA_KEY_QUALIFIERS
    if last == "base":  # Rails SECRET_KEY_BASE
        return words[-3:-1] == ["secret", "key"]
    if last in ("value", "data", "material"):  # secret_value, client-key-data, key_material
        return before in _SECRET_BEFORE or (
            before == "key" and last != "value" and _key_words_secret(words[:-1]))
    if last == "id":  # a service account's private_key_id
        return words[-3:-1] == ["private", "key"]
    if last in _PHRASE_WORDS:
        return before in _PHRASE_BEFORE
    return last.endswith(_SECRET_SUFFIXES)


def _key_words_secret(words: list[str]) -> bool:
    """``client-key`` of ``client-key-data`` (a bare ``key`` of ``key_material`` too)."""
    return len(words) == 1 or words[-2] not in _DATA_KEY_QUALIFIERS


@functools.lru_cache(maxsize=1024)
def key_is_header(key: str) -> bool:
    """``Authorization`` / ``Cookie``: an unquoted value is the whole rest of the line."""
    words = key_words(key)
    return bool(words) and words[-1] in ("authorization", "cookie")


@functools.lru_cache(maxsize=1024)
def key_is_plural(key: str) -> bool:
    """``API_KEYS``, ``tokens``: a bare value may be a comma-separated list."""
    words = key_words(key)
    return bool(words) and words[-1] in ("keys", "secrets", "passwords", "tokens", "apikeys")


@functools.lru_cache(maxsize=1024)
def key_names_mnemonic(key: str) -> bool:
    """``MNEMONIC``, ``SEED_PHRASE``, ``recovery_words``: the value is a list of words."""
    words = key_words(key)
    return bool(words) and (words[-1] == "mnemonic" or (
        words[-1] in _PHRASE_WORDS and len(words) > 1 and words[-2] in _PHRASE_BEFORE))
