"""Sinks beside the output that a secret reached unredacted, through a real worker: the
``cwd`` of a result, receipt and checkpoint (a directory named by a secret), error texts
that repeat the caller's arguments, and the command sent to a smart-mode judge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures_workers import settings_for
from tests.helpers import call, files_containing, held_command, wait_until
from tests.judge_endpoint import judge_endpoint
from worker.client import SandboxClient

PASSWORD = "hunter2-Sup3rS3cret-Qx81"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SECRETS = (PASSWORD, GITHUB[4:])


def leaked(text: str) -> list[str]:
    """The secrets (or the body of the GitHub token) that ``text`` shows."""
    return [s[:6] for s in SECRETS if s in text]


def test_a_directory_named_by_a_secret_shows_in_no_cwd(
    sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    worker = start_worker(None)
    with SandboxClient(session_id="cwd", settings=settings_for(sbx_home, None)) as c:
        # The secret comes from the session's environment: the command never holds it.
        call(c, "terminal", {"command": f"GH=ghp_{GITHUB[4:20]}; export GH=${{GH}}{GITHUB[20:]}"})
        entered = call(c, "terminal", {"command": 'mkdir -p "/tmp/d/$GH" && cd "/tmp/d/$GH"'})
        assert entered["exit_code"] == 0 and entered["cwd"].startswith("/tmp/d/ghp_"), entered
        after = call(c, "terminal", {"command": "echo still-there"})
        assert after["output"] == "still-there\n"
        assert not leaked(json.dumps(entered)) and not leaked(json.dumps(after)), (entered, after)
        # A background process started there: its checkpoint while it runs, then its receipt.
        started, go, command = held_command(tmp_path, "done")
        bg = call(c, "terminal", {"command": command, "background": True,
                                  "workdir": f"/tmp/d/{GITHUB}"})  # fmt: skip
        assert bg.get("status") == "running", bg
        wait_until(started.exists, 60, "the background command to start")
        assert list((sbx_home / "checkpoints").iterdir())
        assert files_containing(sbx_home, SECRETS) == []
        go.touch()
        done = c.wait(bg["process_id"], timeout=60)
        assert done.status == "exited" and done.exit_code == 0
        assert c.receipt(bg["process_id"]).cwd is not None
    assert files_containing(sbx_home, SECRETS) == []
    assert not leaked(worker.log())


def test_error_texts_that_repeat_the_arguments_show_no_secret(
    sbx_home: Path, start_worker: Any
) -> None:
    worker = start_worker(None)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("terminal", {"command": "echo x", "workdir": f"/nope/{GITHUB}"}),
        ("terminal", {"command": "echo x", "background": True, "workdir": f"/nope/{GITHUB}"}),
        ("terminal", {"command": "echo x", GITHUB: True}),
        (GITHUB, {}),
        ("process", {"action": "poll", "process_id": GITHUB}),
        ("read_file", {"path": f"/nope/{GITHUB}"}),
        ("write_file", {"path": f"/nope/{GITHUB}/x", "content": "x"}),
    ]
    with SandboxClient(session_id="errors", settings=settings_for(sbx_home, None)) as c:
        for tool, args in calls:
            answer = call(c, tool, args)
            assert isinstance(answer.get("error"), str) and answer["error"], (tool, answer)
            assert "[REDACTED]" in answer["error"], (tool, answer)
            assert not leaked(json.dumps(answer)), (tool, answer)
    assert not leaked(worker.log())


def _rot13(text: str) -> str:
    return text.translate(str.maketrans(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
    ))


def test_a_token_glued_escaped_or_split_by_a_bad_byte_shows_nowhere(
    sbx_home: Path, start_worker: Any
) -> None:
    """The command prints the token JSON-escaped after ``\\n``, URL-encoded after ``%3D``,
    glued to a name by ``_`` and split by a byte that is not UTF-8; the tail of its body
    (which the command holds only in ROT13) must show in no result, log, receipt or file."""
    worker = start_worker(None)
    body = GITHUB[4:]
    head, tail = body[:10], body[10:]
    command = (
        f"A={head}; B=$(echo {_rot13(tail)} | tr A-Za-z N-ZA-Mn-za-m); "
        "printf '{\"log\": \"start\\\\nghp_%s%s\"}\\n' $A $B; "
        "printf 'body=token%%3Dghp_%s%s&x=1\\n' $A $B; "
        "printf 'tool_ghp_%s%s done\\n' $A $B; "
        "printf 'raw ghp_%s\\377%s end\\n' $A $B"
    )
    with SandboxClient(session_id="glued", settings=settings_for(sbx_home, None)) as c:
        now = call(c, "terminal", {"command": command})
        assert now["exit_code"] == 0, now
        assert now["output"].count("ghp_...[REDACTED]") == 4, now
        assert "start\\nghp_" in now["output"] and "tool_ghp_" in now["output"], now
        bg = call(c, "terminal", {"command": command, "background": True})
        assert c.wait(bg["process_id"], timeout=60).status == "exited"
        log = c.logs(bg["process_id"])
        receipt = c.receipt(bg["process_id"])
        assert log.text.count("ghp_...[REDACTED]") == 4, log
        answers = [json.dumps(now), log.model_dump_json(), receipt.model_dump_json()]
        assert [a for a in answers if tail in a] == []
    assert files_containing(sbx_home, [tail]) == []
    assert tail not in worker.log()


@pytest.fixture
def judge() -> Iterator[tuple[str, list[str]]]:
    """A judge model's endpoint answering DENY, and the bodies it got."""
    with judge_endpoint(lambda body: "DENY") as endpoint:
        yield endpoint


def test_the_judge_is_sent_the_command_redacted(
    sbx_home: Path, start_worker: Any, judge: tuple[str, list[str]]
) -> None:
    url, bodies = judge
    config = {"approvals": {"mode": "smart", "judge": {"url": url}}}
    (sbx_home / "config.yaml").write_text(yaml.safe_dump(config))
    start_worker(None)
    command = f"git push -f https://bot:{PASSWORD}@example.com/a/b.git main"
    with SandboxClient(session_id="judged", settings=settings_for(sbx_home, None)) as c:
        answer = call(c, "terminal", {"command": command})
    assert answer["status"] == "blocked", answer
    assert len(bodies) == 1
    asked = json.loads(bodies[0])["messages"][1]["content"]
    assert "git push -f https://bot:[REDACTED]@example.com/a/b.git main" in asked, asked
    assert not leaked(bodies[0])
