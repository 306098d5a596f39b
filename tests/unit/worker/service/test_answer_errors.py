"""redact_error: only an answer's top-level error text changes."""

from __future__ import annotations

import json

from worker.service.answer_errors import redact_error

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_the_error_text_is_redacted_and_nothing_else() -> None:
    answer = json.dumps({"error": f"no such file: /x/{TOKEN}", "token": TOKEN, "n": 1})
    assert json.loads(redact_error(answer)) == {
        "error": "no such file: /x/ghp_...[REDACTED]", "token": TOKEN, "n": 1,
    }  # fmt: skip


def test_answers_without_a_secret_in_their_error_come_back_unchanged() -> None:
    answers = ["pong", "not json {", '["error"]', '{"error": null, "output": "x"}',
               '{"error": "plain failure"}', json.dumps({"error": {"msg": TOKEN}})]  # fmt: skip
    for answer in answers:
        assert redact_error(answer) is answer
