"""The Vercel session shell's log stream, read on the reading thread: the response parser
on every split of its bytes, the service's refusals, a read woken by ``close``, and a
stream that breaks resumed through the SDK with nothing lost or repeated."""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_vercel import vercel_config
from tests.helpers import require_module

require_module("vercel.sandbox", "pip install 'sbx[vercel]'")

from environments.backends.vercel import VercelEnvironment, http11  # noqa: E402
from environments.backends.vercel.http11 import Endpoint  # noqa: E402
from environments.backends.vercel.logfeed import (  # noqa: E402
    LogFeed,
    RecordParser,
    StreamBroken,
    StreamFailed,
)

TEXTS = ["sbx-stream python3\n", "aGk=\n", 'é ✓ \\n "quoted"\n', "last"]


def _record(stream: str, data: Any) -> bytes:
    return json.dumps({"stream": stream, "data": data}).encode() + b"\n"


def _chunked(*bodies: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
    head += b"Transfer-Encoding: chunked\r\n\r\n"
    return head + b"".join(b"%x\r\n%s\r\n" % (len(b), b) for b in bodies) + b"0\r\n\r\n"


def _sized(status: int, body: bytes) -> bytes:
    return b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body)


RESPONSE = _chunked(
    _record("stdout", TEXTS[0]) + b'{"command": {"id": "cmd_1"}}\n',
    _record("stdout", TEXTS[1]) + _record("stderr", "not stdout"),
    _record("stdout", TEXTS[2])[:9],  # a record split across chunks
    _record("stdout", TEXTS[2])[9:] + b"\n\n" + _record("stdout", TEXTS[3]),
)


def _parse(pieces: Iterator[bytes]) -> tuple[str, RecordParser]:
    parser = RecordParser()
    texts = [text for piece in pieces for text in parser.feed(piece)]
    return "".join(texts), parser


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(RESPONSE)])
def test_every_split_of_a_response_gives_the_same_stdout(size: int) -> None:
    text, parser = _parse(RESPONSE[i : i + size] for i in range(0, len(RESPONSE), size))
    assert text == "".join(TEXTS)
    assert parser.ended


def test_a_body_read_to_the_end_of_the_connection() -> None:
    head = b"HTTP/1.1 200 OK\r\n\r\n"
    text, parser = _parse(iter([head + _record("stdout", "a"), _record("stdout", "b")]))
    assert text == "ab" and not parser.ended
    parser.finish()
    assert parser.ended


TRANSIENT = [(429, "rate_limited"), (503, "unavailable"), (400, "sandbox_stream_closed")]


@pytest.mark.parametrize(("status", "code"), TRANSIENT)
def test_transient_refusals_break_the_stream(status: int, code: str) -> None:
    body = json.dumps({"error": {"code": code}}).encode()
    with pytest.raises(StreamBroken):
        _parse(iter([_sized(status, body)]))


@pytest.mark.parametrize("status", [404, 410])
def test_a_refusal_for_good_ends_the_stream(status: int) -> None:
    body = json.dumps({"error": {"code": "sandbox_stopped"}}).encode()
    text, parser = _parse(iter([_sized(status, body)]))
    assert text == "" and parser.ended


def test_in_band_errors() -> None:
    closed = _record("error", {"code": "sandbox_stream_closed"})
    with pytest.raises(StreamBroken):
        _parse(iter([_chunked(_record("stdout", "a"), closed)]))
    with pytest.raises(StreamFailed):
        _parse(iter([_chunked(_record("error", {"code": "internal"}))]))


@pytest.mark.parametrize("cut", [10, len(RESPONSE) // 2, len(RESPONSE) - 3])
def test_a_connection_that_ends_early_breaks_the_stream(cut: int) -> None:
    _, parser = _parse(iter([RESPONSE[:cut]]))
    assert not parser.ended
    with pytest.raises(StreamBroken):
        parser.finish()


def test_a_truncated_last_record_breaks_the_stream() -> None:
    with pytest.raises(StreamBroken):
        _parse(iter([_chunked(_record("stdout", "a") + b'{"stream": "std')]))


@pytest.fixture
def quiet_server() -> Iterator[tuple[Endpoint, threading.Event]]:
    """A loopback server that answers a request with a stream head, then nothing."""
    listener = socket.create_server(("127.0.0.1", 0))
    served = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        conn, _ = listener.accept()
        conns.append(conn)
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        served.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    yield Endpoint(False, "127.0.0.1", port, "", "t", "team", "test", 5.0, 5.0), served
    thread.join(10)
    for conn in conns:
        conn.close()
    listener.close()


def test_a_read_times_out_and_close_wakes_a_waiting_read(
    quiet_server: tuple[Endpoint, threading.Event],
) -> None:
    endpoint, served = quiet_server
    feed = LogFeed(endpoint, "sess", "cmd")
    assert feed.read(0.05) is None  # connected (the request sent), no record yet
    assert served.wait(30)  # the head was sent: the next read takes it in and waits on
    results: list[str | None] = []
    reader = threading.Thread(target=lambda: results.append(feed.read(None)))
    reader.start()
    deadline = time.monotonic() + 30
    while not feed._lock.locked():  # until the reader is inside its read (or stuck)
        assert time.monotonic() < deadline, "the reader never started its read"
        time.sleep(0.001)
    feed.close()
    reader.join(30)
    assert not reader.is_alive()
    assert results == [""]
    assert feed.read(None) == ""


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sbx-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_a_stream_over_tls_arrives_whole_in_small_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS records that end mid-record and a non-blocking socket with decrypted bytes
    pending: every byte still arrives, in order, and the end is seen."""
    cert_file, key_file = _self_signed(tmp_path)
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert_file, key_file)
    client_side = ssl.create_default_context(cafile=str(cert_file))
    monkeypatch.setattr(http11, "_tls", client_side)
    listener = socket.create_server(("127.0.0.1", 0))
    texts = [f"line {i} {'x' * (i * 37 % 700)}\n" for i in range(200)]
    body = b"".join(_record("stdout", t) for t in texts)

    def serve() -> None:
        raw, _ = listener.accept()
        with server_side.wrap_socket(raw, server_side=True) as conn:
            conn.recv(65536)
            response = _chunked(*(body[i : i + 701] for i in range(0, len(body), 701)))
            for i in range(0, len(response), 97):  # one TLS record per 97 bytes
                conn.sendall(response[i : i + 97])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    feed = LogFeed(Endpoint(True, "127.0.0.1", port, "", "t", "team", "test", 5.0, 5.0), "s", "c")
    got = []
    while text := feed.read(30):
        got.append(text)
    thread.join(30)
    listener.close()
    assert "".join(got) == "".join(texts)
    assert feed.read(0) == ""
    assert feed.delivered == len("".join(texts))


@pytest.mark.parametrize("after", [1, 5])
def test_a_broken_log_stream_is_resumed_through_the_sdk(fake_vercel: Any, after: int) -> None:
    fake_vercel.server.tear_next_log_stream = after
    env = VercelEnvironment("vc-tear", vercel_config(fake_vercel))
    try:
        results = [env.exec(f"echo line-{i}; export N={i}; cd /tmp") for i in range(6)]
        assert [r.output for r in results] == [f"line-{i}\n" for i in range(6)]
        assert not any(r.shell_restarted for r in results)
        assert env.exec('echo "$N $PWD"').output == "5 /tmp\n"
        # The direct stream broke once; the SDK's reader replayed the log, skipping what
        # was delivered, and carried on.
        assert len(fake_vercel.requests_to("GET", "/logs")) == 2
    finally:
        env.close()


def test_without_a_direct_address_the_sdk_carries_the_stream(
    fake_vercel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from environments.backends.vercel import channel

    monkeypatch.setattr(channel, "endpoint", lambda api: None)  # as when a proxy applies
    env = VercelEnvironment("vc-sdk-stream", vercel_config(fake_vercel))
    try:
        assert env.exec("cd /tmp; printf 'a\\000b'").output == "a\x00b"
        assert env.exec("pwd").output == "/tmp\n"
        assert fake_vercel.requests_to("POST", "/stdin")  # the SDK's stdin writes
    finally:
        env.close()
