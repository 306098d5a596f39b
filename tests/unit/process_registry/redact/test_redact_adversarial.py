"""Adversarial inputs: every one must complete (linear time, no catastrophic
backtracking) and stay consistent.  No timing asserts here -- speed is measured
in bench/bench_redact.py; the suite's timeout guards against a hang."""

from __future__ import annotations

import random

import pytest

from process_registry.redact import StreamRedactor, redact_text

MB = 1_000_000

ADVERSARIAL: dict[str, str] = {
    # the ones named in the issue, at 1 MB
    "a": "a" * MB,
    "sk-": "sk-" * (MB // 3),
    "eyJ": "eyJ" * (MB // 3),
    "equals": "=" * MB,
    "begin-no-end": "-----BEGIN PRIVATE KEY-----\n" + "QUJD" * (MB // 4),
    # more shapes that make a naive recogniser re-read long runs
    "colons": ":" * MB,
    "dashes": "-" * MB,
    "underscores": "_" * MB,
    "begin-repeated": "-----BEGIN PRIVATE KEY-----" * (MB // 27),
    "begin-header-only": "-----BEGIN " + "A " * (MB // 2),
    "eyJ-dots": "eyJ." * (MB // 4),
    "jwt-without-payload": ("eyJ" + "a" * 20 + ".x") * (MB // 25),
    "key-equals": "password=" * (MB // 9),
    "key-colon": "password: " * (MB // 10),
    "key-quote": 'password="' * (MB // 10),
    "key-fillers": 'password"""' * (MB // 11),
    "key-ref": "TOKEN=$X " * (MB // 9),
    "long-key": ("k" * 100 + "_password=$") * (MB // 111),
    "url-scheme": "://" * (MB // 3),
    "url-no-at": "http://" + "a" * MB,
    "url-user-colon": "http://a:" * (MB // 9),
    "ghp": "ghp_" * (MB // 4),
    "akia": "AKIA" * (MB // 4),
    "ac": "AC" * (MB // 2),
    "bearer": "Bearer " * (MB // 7),
    "bearer-long": "Bearer " + "a1" * (MB // 2),
    "cli": "--password " * (MB // 11),
    "xml": "<password>" * (MB // 10),
    "telegram-ish": ("123456789:" + "A" * 34 + "-") * (MB // 45),
    "digits-colon": "1234567890:" * (MB // 11),
    "quotes": '"' * MB,
    "backslashes": "\\" * MB,
    "newlines": "\n" * MB,
    "many-short-keys": (" sk-" + "a" * 30) * (MB // 34),
    "huge-secret": "token=" + "x1" * MB,
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_input_completes_and_is_consistent(name: str) -> None:
    text = ADVERSARIAL[name]
    out = redact_text(text)
    assert len(out) < 2 * len(text) + 64  # short secrets may grow into placeholders
    assert redact_text(out) == out
    r = StreamRedactor()
    chunked = "".join(r.feed(text[i : i + 65536]) for i in range(0, len(text), 65536))
    assert chunked + r.flush() == out


def test_begin_without_end_redacts_a_bounded_block() -> None:
    out = redact_text(ADVERSARIAL["begin-no-end"])
    assert out.startswith("-----BEGIN PRIVATE KEY-----\n[REDACTED]")


def test_repeated_prefixes_are_not_secrets() -> None:
    for name in ("sk-", "eyJ", "ghp", "akia", "colons", "equals"):
        assert redact_text(ADVERSARIAL[name]) == ADVERSARIAL[name], name


# Pieces of tokens, glue, separators and placeholders: mixed at random they make
# tokens glued to each other, cut at their vendor's longest body, or ending right
# where another's placeholder goes after a first pass.
_PIECES = ("_", "-", "ghp_", "sk-proj-", "sk-", "AKIA", "glpat-", "xoxb-", "github_pat_", "KEY_",
           "\\n", "%3D", "\\u003d", " ", "\n", "\u200b", "\ufffd", "=", "[REDACTED]",
           "...[REDACTED]")


@pytest.mark.parametrize("seed", range(3))
def test_mixed_token_pieces_redact_once_and_stream_alike(seed: int) -> None:
    docs, cuts = random.Random(seed), random.Random(-seed)
    for _ in range(2000):
        text = "".join(
            docs.choice(_PIECES) if docs.random() < 0.5
            else "".join(docs.choice("ABCDEFabcdef0123456789xyzQ")
                         for _ in range(docs.choice((1, 8, 20, 36, 60, 255, 330))))
            for _ in range(docs.randint(1, 14))
        )
        once = redact_text(text)
        assert redact_text(once) == once, text
        at = sorted(cuts.sample(range(1, len(text) + 1), min(len(text), 6)))
        r = StreamRedactor()
        streamed = [r.feed(text[a:b]) for a, b in zip([0, *at], [*at, len(text)], strict=True)]
        assert "".join(streamed) + r.flush() == once, text
