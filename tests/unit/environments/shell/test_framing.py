"""Marker framing and environment-dump parsing."""

from __future__ import annotations

import subprocess

import pytest

from environments.shell.framing import Marker, MarkerScanner, Output, parse_export_dump, shell_quote
from environments.shell.output import OutputCapture

TOKEN = b"0123456789abcdef0123456789abcdef"
STREAM = (
    b"out1 " + TOKEN + b"P42" + TOKEN + b".mid\x00dle" + TOKEN + b"C/tmp/x y" + TOKEN + b"."
    + b"tail-no-newline" + TOKEN + b"E3" + TOKEN + b"."
)  # fmt: skip
EXPECTED = [Marker("P", b"42"), Marker("C", b"/tmp/x y"), Marker("E", b"3")]


def _run(chunks: list[bytes]) -> tuple[bytes, list[Marker]]:
    scanner = MarkerScanner(TOKEN)
    out, markers = b"", []
    for chunk in chunks:
        for event in scanner.feed(chunk):
            if isinstance(event, Output):
                out += event.data
            else:
                markers.append(event)
    return out + scanner.flush(), markers


def test_whole_stream() -> None:
    assert _run([STREAM]) == (b"out1 mid\x00dletail-no-newline", EXPECTED)


@pytest.mark.parametrize("split", range(1, len(STREAM)))
def test_split_anywhere(split: int) -> None:
    assert _run([STREAM[:split], STREAM[split:]]) == (b"out1 mid\x00dletail-no-newline", EXPECTED)


def test_byte_by_byte() -> None:
    assert _run([bytes([b]) for b in STREAM]) == (b"out1 mid\x00dletail-no-newline", EXPECTED)


def test_token_followed_by_unknown_kind_is_output() -> None:
    out, markers = _run([b"a" + TOKEN + b"Zb" + TOKEN + b"E0" + TOKEN + b"."])
    assert (out, markers) == (b"a" + TOKEN + b"Zb", [Marker("E", b"0")])


def test_unterminated_marker_is_flushed_as_output() -> None:
    out, markers = _run([b"x" + TOKEN + b"P12"])
    assert (out, markers) == (b"x" + TOKEN + b"P12", [])


def test_short_token_refused() -> None:
    with pytest.raises(ValueError):
        MarkerScanner(b"short")


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_export_dump_round_trip(shell: str) -> None:
    values = {
        "PLAIN": "x", "EMPTY": "", "QUOTES": "it's \"q\"", "DOLLAR": "$HOME `cmd` \\",
        "NEWLINE": "a\nb", "TAB": "a\tb", "CTRL": "\x01\x1b", "UTF8": "é ✓",
    }  # fmt: skip
    dump = subprocess.run([shell, "-c", "export -p"], env=values, capture_output=True).stdout
    parsed = parse_export_dump(dump)
    for name, value in values.items():
        assert parsed[name] == value, name


def test_export_dump_skips_valueless_and_garbage() -> None:
    assert parse_export_dump(b'declare -x NOVALUE\ngarbage line\ndeclare -rx R="1"\n') == {"R": "1"}


def test_export_dump_leaves_out_exported_arrays() -> None:
    # bash passes no array to a child: kept as a variable, it would become a bogus one.
    script = "A=(a 'b c'); declare -A M=([k]=v); export A M S=plain; export -p"
    dump = subprocess.run(["bash", "-c", script], env={}, capture_output=True).stdout
    assert b"declare -ax A=" in dump and b"declare -Ax M=" in dump
    parsed = parse_export_dump(dump)
    assert parsed["S"] == "plain" and "A" not in parsed and "M" not in parsed


def test_export_dump_keeps_bytes_that_are_not_utf8() -> None:
    dump = subprocess.run(["bash", "-c", "export -p"], env={"B": "x\udcff"}, capture_output=True)
    assert parse_export_dump(dump.stdout)["B"].encode("utf-8", "surrogateescape") == b"x\xff"


@pytest.mark.parametrize("value", ["", "a b", "it's", "'", "\n", "$(rm -rf /)", "\\"])
def test_shell_quote_round_trip(value: str) -> None:
    out = subprocess.run(["sh", "-c", f"printf %s {shell_quote(value)}"], capture_output=True)
    assert out.stdout.decode() == value


def test_shell_quote_rejects_nul() -> None:
    with pytest.raises(ValueError):
        shell_quote("a\x00b")


def test_output_capture_exact_when_small() -> None:
    cap = OutputCapture(10)
    cap.feed(b"12345")
    cap.feed(b"67890")
    assert (cap.text(), cap.truncated, cap.total_bytes) == ("1234567890", False, 10)


def test_output_capture_head_tail_and_marker() -> None:
    cap = OutputCapture(10)
    for i in range(100):
        cap.feed(bytes([48 + i % 10]))
    assert cap.truncated and cap.omitted_bytes == 90
    assert cap.text() == "01234\n... [sbx: 90 bytes of output omitted] ...\n56789"


def test_output_capture_does_not_split_utf8_in_tail() -> None:
    cap = OutputCapture(8)
    cap.feed(b"aaaa" + "é".encode() * 10)
    text = cap.text()
    assert text.startswith("aaaa\n") and text.endswith("éé")
    assert "\ufffd" not in text


def _capture(data: bytes, limit: int) -> str:
    cap = OutputCapture(limit)
    for i in range(0, len(data), 7):
        cap.feed(data[i : i + 7])
    return cap.text()


def test_output_capture_tail_starts_at_a_line_start() -> None:
    secret = "hunter2-Sup3rS3cret-value"
    lines = b"".join(f"line {i}\n".encode() for i in range(200))
    data = lines + f"export API_KEY={secret}\n".encode() + b"end\n"
    # Every limit whose kept tail starts inside the KEY= line.
    for limit in range(20, 120):
        text = _capture(data, limit)
        tail = text.split("omitted] ...\n", 1)[1]
        # Whole, the line is the redactor's to catch; a part of it must not be there.
        tail = tail.replace(f"export API_KEY={secret}\n", "")
        assert not any(secret[i:] in tail for i in range(len(secret) - 3)), (limit, tail)
        assert text.endswith("end\n")


def test_output_capture_head_ends_at_a_token_boundary() -> None:
    token = "ghp_" + "Zq8Wx7Ec6Rv5Tb4Yn3Um2Ik1Ol0Pa9Sd8Fg7Hj6"
    data = f"token {token} and more\n".encode() + b"x\n" * 500
    for limit in range(16, 100):
        head = _capture(data, limit).split("\n... [sbx:", 1)[0]
        assert head in ("", "token ", f"token {token} ", f"token {token} and ")


def test_output_capture_drops_a_private_key_cut_open() -> None:
    key = "-----BEGIN RSA PRIVATE KEY-----\n" + "QUJD\n" * 50 + "-----END RSA PRIVATE KEY-----\n"
    data = b"x\n" * 500 + key.encode() + b"after\n"
    text = _capture(data, 200)
    assert "QUJD" not in text and text.endswith("after\n")


def test_output_capture_omitted_count_is_exact() -> None:
    data = b"".join(f"{i} words here\n".encode() for i in range(1000))
    cap = OutputCapture(300)
    cap.feed(data)
    head, tail = cap.text().split("\n... [sbx: ")
    omitted = int(tail.split(" ", 1)[0])
    shown = head.encode() + tail.split("omitted] ...\n", 1)[1].encode()
    assert omitted + len(shown) == len(data)
