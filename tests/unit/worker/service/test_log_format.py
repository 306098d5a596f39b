"""JSON log lines: one object a line, tracebacks inside it, the setting validated."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from pydantic import ValidationError

from worker.service.log_format import JsonLineFormatter
from worker.settings import Settings


def _record(msg: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom\nsecond line")
        except ValueError:
            exc_info = sys.exc_info()
    return logging.LogRecord("sbx.test", logging.WARNING, __file__, 1, msg, args, exc_info)


def test_a_record_is_one_line_of_json_with_its_traceback() -> None:
    line = JsonLineFormatter().format(_record("call %s\nfailed", "c1", exc=True))
    assert "\n" not in line
    record = json.loads(line)
    assert (record["level"], record["logger"]) == ("WARNING", "sbx.test")
    assert record["message"] == "call c1\nfailed"
    assert "ValueError: boom" in record["exc"]
    assert record["ts"].endswith("+00:00")


def test_log_format_is_text_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SBX_LOG_FORMAT", "json")
    assert Settings().log_format == "json"
    monkeypatch.setenv("SBX_LOG_FORMAT", "xml")
    with pytest.raises(ValidationError):
        Settings()
