"""``log`` reads by byte offset over multi-byte characters, on a real process's output:
every read that is not at the end advances, and no character is ever split."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.backends.local.environment import LocalEnvironment
from process_registry.table import ProcessTable
from process_registry.tracking import make_chunk

OWNER = "s-owner"
TEXT = "aé\n😀z€\n"
# printf octal escapes: the command itself stays ASCII.
PRINTF = r"printf 'a\303\251\n\360\237\230\200z\342\202\254\n'"


@pytest.fixture(params=[False, True], ids=["plain", "redact_live"])
def any_table(
    request: pytest.FixtureRequest, home: Path, env: LocalEnvironment, spool: Path
) -> Iterator[ProcessTable]:
    reg = ProcessTable(home, lambda rec: env, spool_dir=spool, redact_live=request.param)
    yield reg
    reg.close()


@pytest.fixture(params=["tracked", "from its receipt"])
def finished(request: pytest.FixtureRequest, any_table: ProcessTable, env: LocalEnvironment) -> str:
    """A finished process that wrote :data:`TEXT`: read from its output file (still
    tracked) or from its receipt (its output file gone)."""
    rec = any_table.start(env, PRINTF, owner_session_id=OWNER)
    assert any_table.wait(rec.process_id, OWNER, timeout=60).status == "exited"
    if request.param == "from its receipt":
        Path(rec.output_path).unlink()
    return rec.process_id


def test_a_one_byte_limit_always_advances_and_joins_to_the_output(
    any_table: ProcessTable, finished: str
) -> None:
    size = len(TEXT.encode())
    texts, offset = [], 0
    for _ in range(size + 1):  # a read that does not advance would loop past this
        chunk = any_table.log(finished, OWNER, offset, 1)
        texts.append(chunk.text)
        if chunk.eof:
            break
        assert chunk.next_offset > offset, chunk
        assert len(chunk.text.encode()) <= 1 + 3
        offset = chunk.next_offset
    assert chunk.eof and "".join(texts) == TEXT


@pytest.mark.parametrize("limit", [1, 2, 3, 100])
def test_a_read_at_any_offset_advances_and_splits_no_character(
    any_table: ProcessTable, finished: str, limit: int
) -> None:
    data = TEXT.encode()
    for offset in range(len(data)):
        chunk = any_table.log(finished, OWNER, offset, limit)
        assert chunk.next_offset > offset, (offset, chunk)
        assert "\ufffd" not in chunk.text, (offset, chunk)
        # It starts at the first character at or after ``offset`` (``offset`` says where).
        assert chunk.offset >= offset
        assert data[chunk.offset : chunk.next_offset].decode() == chunk.text
        assert chunk.offset == offset or data[offset] & 0xC0 == 0x80


def test_the_probes_read_inside_e_acute() -> None:
    data = "aé\n".encode()
    one = make_chunk("p", data[1:2], 1, 1, ended=True, status="exited", redact_live=False,
                     total=3 + 1, before=data[:1], after=data[2:])  # fmt: skip
    assert (one.text, one.next_offset, one.eof) == ("é", 3, False)
    inside = make_chunk("p", data[2:3], 2, 1, ended=True, status="exited", redact_live=False,
                        total=4, before=data[:2], after=data[3:])  # fmt: skip
    assert (inside.text, inside.offset, inside.next_offset, inside.eof) == ("\n", 3, 4, True)


def test_a_stray_byte_is_returned_as_one_replacement_not_skipped() -> None:
    data = b"\xa9\xa9x"
    chunk = make_chunk("p", data[1:2], 1, 1, ended=True, status="exited", redact_live=False,
                       total=3, before=data[:1], after=data[2:])  # fmt: skip
    assert (chunk.text, chunk.offset, chunk.next_offset) == ("\ufffd", 1, 2)
    broken = make_chunk("p", b"\xc3", 0, 1, ended=True, status="exited", redact_live=False,
                        total=2, after=b"x")  # fmt: skip
    assert (broken.text, broken.next_offset) == ("\ufffd", 1)
