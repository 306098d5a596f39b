"""StreamRedactor: joined output equals redact_text of the joined input, for any split."""

from __future__ import annotations

import random

import pytest

from process_registry.redact import HOLD, StreamRedactor, redact_text
from tests.unit.process_registry.redact.test_redact import (
    JWT,
    PEM_BODY,
    STRUCTURAL,
    VENDOR_CASES,
    S,
    p,
    rnd,
)


def stream(chunks: list[str]) -> tuple[str, StreamRedactor]:
    r = StreamRedactor()
    out = [r.feed(c) for c in chunks]
    out.append(r.flush())
    return "".join(out), r


SPLIT_SAMPLES = [
    *[f"a {c[1]} b\n" for c in VENDOR_CASES[::4]],
    *[c[1] for c in STRUCTURAL if c[0] in ("export", "json", "bearer-header", "postgres", "jwt",
                                             "telegram", "cli-space", "xml", "cookie", "pem",
                                             "pem-in-json", "pem-truncated", "escaped-json")],
]


@pytest.mark.parametrize("text", SPLIT_SAMPLES)
def test_split_at_every_offset(text: str) -> None:
    want = redact_text(text)
    for i in range(len(text) + 1):
        got, _ = stream([text[:i], text[i:]])
        assert got == want, i


@pytest.mark.parametrize("text", SPLIT_SAMPLES[:6])
def test_three_way_splits(text: str) -> None:
    want = redact_text(text)
    for i in range(0, len(text) + 1, 3):
        for j in range(i, len(text) + 1, 5):
            assert stream([text[:i], text[i:j], text[j:]])[0] == want, (i, j)


def test_char_by_char() -> None:
    text = "\n".join(SPLIT_SAMPLES)
    assert stream(list(text))[0] == redact_text(text)


def _document(seed: int) -> str:
    rng = random.Random(seed)
    filler = [
        "gcc -O2 -c src/main.c -o build/main.o",
        "-rw-r--r--  1 user staff  4096 Nov 27 12:00 token_store.py",
        '{"id": "123e4567-e89b-12d3-a456-426614174000", "usage": {"total_tokens": 42}}',
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "Downloading package-1.0.tar.gz (12 kB)\r 40%\r 80%\r100%",
        "export PATH=/usr/bin:$PATH TOKEN=$GITHUB_TOKEN PASSWORD_MIN_LENGTH=8",
    ]
    secrets = [
        *[c[1] for c in VENDOR_CASES],
        f"password={S}", f"Authorization: Bearer {S}", f"postgres://u:{S}@db/x", JWT,
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        '"private_key": "-----BEGIN PRIVATE KEY-----\\n' + PEM_BODY.replace("\n", "\\n") + '"',
        "x" * (HOLD + 1000) + f" api_key={S} " + "y" * 3000,  # a line longer than HOLD
    ]
    lines = []
    for _ in range(1500):
        lines.append(rng.choice(secrets) if rng.random() < 0.15 else rng.choice(filler))
    return "\n".join(lines) + "\n-----BEGIN PRIVATE KEY-----\n" + PEM_BODY[:100]


@pytest.mark.parametrize("seed", range(6))
def test_random_chunkings_of_a_mixed_document(seed: int) -> None:
    text = _document(seed)
    want = redact_text(text)
    assert S not in want
    rng = random.Random(seed)
    sizes = [1, 2, 7, 64, 500, 4096, 20000, 70000]
    chunks, i = [], 0
    while i < len(text):
        n = rng.choice(sizes)
        chunks.append(text[i : i + n])
        i += n
    got, _ = stream(chunks)
    assert got == want


def test_long_line_secrets_around_the_hold_cut() -> None:
    # Secrets at many offsets of one line far longer than HOLD, fed in odd chunks.
    parts = []
    for k in range(40):
        parts.append("z" * (997 * k % 5000) + f" token={rnd(30)} " + p("gh", "p_", rnd(36)))
    text = " ".join(parts)  # no line break at all
    assert len(text) > 3 * HOLD
    for size in (1013, 4096, 9999):
        got, _ = stream([text[i : i + size] for i in range(0, len(text), size)])
        assert got == redact_text(text)


def test_private_key_split_at_every_line() -> None:
    text = (f"before\n-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}\n"
            "-----END EC PRIVATE KEY-----\nafter\n")
    want = redact_text(text)
    assert PEM_BODY[:20] not in want
    lines = text.splitlines(keepends=True)
    assert stream(lines)[0] == want
    for i in range(len(text)):
        assert stream([text[:i], text[i:]])[0] == want


def test_complete_lines_come_out_at_once() -> None:
    r = StreamRedactor()
    assert r.feed(f"one password={S}\ntwo par") == "one password=[REDACTED]\n"
    assert r.pending == len("two par")
    assert r.feed("tial\n") == "two partial\n"
    assert r.pending == 0
    assert r.flush() == ""


def test_open_private_key_is_held_until_it_ends() -> None:
    r = StreamRedactor()
    out = r.feed("ok\n-----BEGIN PRIVATE KEY-----\n" + PEM_BODY[:64] + "\n")
    assert out == "ok\n"
    out += r.feed(PEM_BODY[65:] + "\n-----END PRIVATE KEY-----\nnext\n")
    out += r.flush()
    assert out == "ok\n-----BEGIN PRIVATE KEY-----\n[REDACTED]\n-----END PRIVATE KEY-----\nnext\n"


def test_memory_stays_bounded_without_line_breaks() -> None:
    r = StreamRedactor()
    emitted = 0
    for _ in range(200):
        emitted += len(r.feed("a" * 10_000))
        assert r.pending <= 2 * HOLD + 10_000
    emitted += len(r.flush())
    assert emitted == 2_000_000


def test_memory_stays_bounded_with_an_unterminated_key_block() -> None:
    r = StreamRedactor()
    r.feed("-----BEGIN PRIVATE KEY-----\n")
    for _ in range(2000):
        r.feed("QUFBQUFB" * 8 + "\n")
        assert r.pending <= 2 * HOLD + 100
    assert "QUFBQUFB" not in r.flush()[:9000]


def test_flush_starts_a_new_stream() -> None:
    r = StreamRedactor()
    assert r.feed("tail without newline") == ""
    assert r.flush() == "tail without newline"
    assert r.pending == 0
    assert r.feed(f"token={S}\n") == "token=[REDACTED]\n"
    assert r.feed("") == ""
    assert r.flush() == ""


def test_carriage_returns_end_lines_too() -> None:
    r = StreamRedactor()
    assert r.feed(f" 10%\r 20% password={S}\r 30") == " 10%\r 20% password=[REDACTED]\r"
    assert r.flush() == " 30"
