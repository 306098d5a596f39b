"""Redaction in context: a window of output never shows part of a secret, wherever it
is cut; the log of a process at every offset/limit split; a receipt excerpt cut mid-line."""

from __future__ import annotations

from pathlib import Path

import pytest

from environments.backends.local.environment import LocalEnvironment
from process_registry.in_context import redact_between, redacted_span
from process_registry.models import InvalidRead
from process_registry.receipt_excerpt import excerpt
from process_registry.table import ProcessTable
from tests.unit.process_registry.secrets import GITHUB, OPENAI, PASSWORD

LINES = (
    f"export API_KEY={PASSWORD}\n"
    f"token: {GITHUB}\n"
    f'{{"password": "{PASSWORD}", "key": "{OPENAI}"}}\n'
    "plain line\n"
)


def fragments(secret: str, minimum: int = 6) -> list[str]:
    """Every piece of ``secret`` long enough to count as a leak."""
    return [
        secret[i:j]
        for i in range(len(secret))
        for j in range(i + minimum, len(secret) + 1)
    ]


def leaked(text: str) -> list[str]:
    return [f for s in (GITHUB, OPENAI, PASSWORD) for f in fragments(s) if f in text]


def test_every_split_of_a_stream_is_redacted() -> None:
    data = LINES.encode()
    for start in range(len(data)):
        for end in (start + 1, start + 7, start + 23, len(data)):
            end = min(end, len(data))
            text = redacted_span(lambda off, n: data[off : off + n], start, end, floor=0,
                                 total=len(data))  # fmt: skip
            assert not leaked(text), (start, end, text)


def test_sequential_windows_join_to_the_whole_redaction() -> None:
    from process_registry.redact import redact_text

    text = "a b c\nplain\n" * 5
    assert "".join(redact_between(text[:i], text[i:j], text[j:])
                   for i, j in ((0, 7), (7, 30), (30, len(text)))) == redact_text(text)  # fmt: skip


def test_a_window_right_after_the_key_is_redacted() -> None:
    assert redact_between("export API_KEY=", f"{PASSWORD}\nnext\n", "") == "[REDACTED]\nnext\n"


def test_receipt_excerpt_cut_inside_a_long_line_shows_no_secret() -> None:
    filler = "x" * 3000
    data = f"{filler} API_KEY={PASSWORD} {filler} API_KEY={PASSWORD} {filler}\n".encode()
    for cap in range(200, 2400, 37):
        text, cut = excerpt(lambda off, n: data[off : off + n], len(data), cap)
        assert cut and not leaked(text), cap


@pytest.fixture
def finished(table: ProcessTable, env: LocalEnvironment, tmp_path: Path) -> str:
    source = tmp_path / "out.txt"
    source.write_text(LINES * 3)
    rec = table.start(env, f"cat {source}", owner_session_id="s-owner")
    table.wait(rec.process_id, "s-owner", timeout=60)
    return rec.process_id


def test_process_log_at_every_offset_and_limit_shows_no_secret_part(
    table: ProcessTable, finished: str
) -> None:
    size = len((LINES * 3).encode())
    for offset in range(0, size, 3):
        for limit in (1, 5, 17, 64):
            chunk = table.log(finished, "s-owner", offset, limit)
            assert not leaked(chunk.text), (offset, limit, chunk.text)


def test_process_log_of_a_receipt_at_every_split(
    home: Path, env: LocalEnvironment, spool: Path, finished: str
) -> None:
    fresh = ProcessTable(home, lambda rec: env, spool_dir=spool)  # only the receipt is left
    try:
        body = len(fresh.receipts.read(finished, "s-owner").output.encode())
        for offset in range(0, body, 5):
            chunk = fresh.log(finished, "s-owner", offset, 11)
            assert not leaked(chunk.text), (offset, chunk.text)
    finally:
        fresh.close()


@pytest.mark.parametrize("offset", [-1, 1 << 80])
def test_an_offset_out_of_range_is_a_clean_error(
    table: ProcessTable, finished: str, offset: int
) -> None:
    with pytest.raises(InvalidRead):
        table.log(finished, "s-owner", offset, 10)


def test_a_running_processs_unfinished_line_is_held_back(
    table: ProcessTable, env: LocalEnvironment
) -> None:
    from tests.helpers import wait_until

    rec = table.start(
        env, f"echo first; printf 'token: {GITHUB[:12]}'; exec sleep 30", owner_session_id="s-owner"
    )
    wait_until(lambda: "first" in table.log(rec.process_id, "s-owner").text, 60, "first line")
    chunk = table.log(rec.process_id, "s-owner")
    assert chunk.text == "first\n" and not leaked(chunk.text)
    assert GITHUB[:12] not in table.poll(rec.process_id, "s-owner").output_tail
    table.kill(rec.process_id, "s-owner")


def test_a_redacted_command_keeps_its_surrounding_characters(
    table: ProcessTable, env: LocalEnvironment
) -> None:
    command = f'echo "TOKEN={GITHUB}" && export API_KEY={PASSWORD}; true'
    rec = table.start(env, command, owner_session_id="s-owner")
    kept = 'echo "TOKEN=ghp_...[REDACTED]" && export API_KEY=[REDACTED]; true'
    assert rec.command == kept
    table.wait(rec.process_id, "s-owner", timeout=60)
    assert table.poll(rec.process_id, "s-owner").command == kept
    assert table.receipts.read(rec.process_id, "s-owner").command == kept
