"""The interactive prompt helper."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import pytest

from registry.approval.prompt import prompt_for_approval, safe_display


@pytest.mark.parametrize(
    ("typed", "answer"),
    [
        ("o\n", "once"),
        ("once\n", "once"),
        ("y\n", "once"),
        ("s\n", "session"),
        ("SESSION\n", "session"),
        ("a\n", "always"),
        ("always\n", "always"),
        ("d\n", "deny"),
        ("no\n", "deny"),
        ("\n", "deny"),
        ("", "deny"),
        ("maybe\nx\nwhat\n", "deny"),
        ("maybe\ns\n", "session"),
    ],
)
def test_answers(typed: str, answer: str) -> None:
    out = io.StringIO()
    got = prompt_for_approval(
        "rm -rf build", "recursive delete", stdin=io.StringIO(typed), stdout=out, timeout=None
    )
    assert got == answer
    assert "rm -rf build" in out.getvalue() and "recursive delete" in out.getvalue()


@pytest.fixture
def silent_pipe() -> Iterator[io.TextIOWrapper]:
    r, w = os.pipe()
    reader = os.fdopen(r, "r")
    try:
        yield reader
    finally:
        reader.close()
        os.close(w)


def test_timeout_denies(silent_pipe: io.TextIOWrapper) -> None:
    out = io.StringIO()
    assert (
        prompt_for_approval(
            "rm -rf x", "recursive delete", stdin=silent_pipe, stdout=out, timeout=0.05
        )
        == "deny"
    )
    assert "denied" in out.getvalue()


def test_terminal_escapes_are_neutralised() -> None:
    out = io.StringIO()
    command = "rm -rf /tmp/x\x1b[2K\x1b[1A\rls -la\x07"
    prompt_for_approval(
        command, "recursive delete", stdin=io.StringIO("d\n"), stdout=out, timeout=None
    )
    shown = out.getvalue()
    assert "\x1b" not in shown and "\r" not in shown and "\x07" not in shown
    assert "\\x0d" in shown and "\\x07" in shown


def test_safe_display_truncates() -> None:
    assert safe_display("a" * 50, limit=10).startswith("a" * 10 + "...")


_HIDDEN = "\u202e,\u202a,\u2066,\u2069,\u200b,\u200e,\u061c,\ufeff,\u2028,\u2029,\U000e0041,\x85"


@pytest.mark.parametrize("hidden", _HIDDEN.split(","))
def test_invisible_formatting_characters_are_escaped(hidden: str) -> None:
    shown = safe_display(f"rm -rf a{hidden}b")
    assert hidden not in shown
    code = ord(hidden)
    assert (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000
            else f"\\U{code:08x}") in shown  # fmt: skip


def test_letters_of_every_script_are_shown_as_they_are() -> None:
    text = "echo héllo мир 你好 שלום مرحبا 🙂"
    assert safe_display(text) == text
