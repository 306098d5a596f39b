"""Adversarial inputs of growing size stay linear: work grows with size, never with its square.

Each input is built at two sizes, ``n`` and ``8 n``.  Two measures, neither a
tight timing: the number of candidates the detectors find (deterministic: at
most 8x, plus a constant), and the CPU time of the larger input over the
smaller (best of three): linear work gives about 8x, quadratic work 64x; the
bound is 32x.  A generous absolute bound catches only a hang.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from process_registry.redact import StreamRedactor, redact_text
from process_registry.redact.rules import RULES

ZW = "\u200b"
# name -> text of about ``n`` characters, shaped to make a naive recogniser re-read it
GROWING: dict[str, Callable[[int], str]] = {
    "prefix-spam": lambda n: "sk-" * (n // 3),
    "vendor-prefixes": lambda n: "ghp_glpat-xoxb-AKIA" * (n // 19),
    "prefix-then-long-run": lambda n: "ghp_" + "a" * n,
    "invisible-joins": lambda n: "ghp_" + ("ab" + ZW) * (n // 3),
    "newline-joins": lambda n: "ghp_ab\n" * (n // 7),
    "ansi-spam": lambda n: "sk-a\x1b[" * (n // 6),
    "sbx-spam": lambda n: "sbx1." * (n // 5),
    "sbx-long": lambda n: "sbx1." + "a." * (n // 2),
    "key-colons": lambda n: "password: " * (n // 10),
    "key-equals-chain": lambda n: "api_key=" * (n // 8),
    "named-values": lambda n: "- name: API_KEY\n  value: " * (n // 25),
    "value-keys": lambda n: '"value": ' * (n // 9),
    "plural-list": lambda n: "API_KEYS=" + "a," * (n // 2),
    "json-array": lambda n: '"api_keys": [' + '"a", ' * (n // 5),
    "mnemonic-words": lambda n: "MNEMONIC=" + "abc " * (n // 4),
    "url-ats": lambda n: "https://" + "a:b@" * (n // 4),
    "url-no-at": lambda n: "https://" + "a:" * (n // 2),
    "scheme-relative": lambda n: " //a" * (n // 4),
    "cli-flags": lambda n: "sudo mysql -p" * (n // 13),
    "cli-deep-segment": lambda n: "curl " + "-u " * (n // 3),
    "netrc-words": lambda n: "machine h login u password " * (n // 27),
    "password-words": lambda n: "password " * (n // 9),
    "crypt-prefixes": lambda n: "$6$" * (n // 3),
    "crypt-unclosed": lambda n: "root:$6$" + "a" * n,
    "ldap-hashes": lambda n: "{SSHA}" * (n // 6),
    "telegram-digits": lambda n: "1234567890:" * (n // 11),
    "discord-dots": lambda n: ("M" + "a" * 23 + ".") * (n // 25),
    "jwt-dots": lambda n: "eyJaaaaaaaaaa." * (n // 14),
    "pem-open": lambda n: "-----BEGIN PRIVATE KEY-----\n" + "QUJD\n" * (n // 5),
    "bearer-spam": lambda n: "Bearer " * (n // 7),
    "azure-tildes": lambda n: "a1Q~" * (n // 4),
    "xml-tags": lambda n: "<password>" * (n // 10),
    "glued-prefixes": lambda n: "a_ghp_b-sk-proj-c%3DAKIA\\nglpat-" * (n // 33),
    "glued-windows": lambda n: ("x_sk-proj-" + "ab-" * 110) * (n // 340),
    "glued-past-window": lambda n: "k_ghp_" + "a" * n,
}
SMALL = 32_768


def candidates(text: str) -> int:
    return sum(1 for r in RULES for _ in r.detector.finditer(text))


def cpu(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        redact_text(text)
        best = min(best, time.process_time() - t0)
    return max(best, 1e-4)


@pytest.mark.parametrize("name", list(GROWING))
def test_work_grows_linearly(name: str) -> None:
    small, large = GROWING[name](SMALL), GROWING[name](8 * SMALL)
    growth = len(large) / len(small)  # about 8
    assert candidates(large) <= growth * candidates(small) + 64
    assert cpu(large) / cpu(small) < 4 * growth, name


@pytest.mark.parametrize("name", list(GROWING))
def test_a_megabyte_completes_and_streams_alike(name: str) -> None:
    text = GROWING[name](1_000_000)
    t0 = time.process_time()
    out = redact_text(text)
    assert time.process_time() - t0 < 60  # only catastrophic backtracking gets near this
    assert redact_text(out) == out
    r = StreamRedactor()
    chunked = "".join(r.feed(text[i : i + 65536]) for i in range(0, len(text), 65536))
    assert chunked + r.flush() == out
