"""Normalisation and the shell lexer."""

from __future__ import annotations

import pytest

from registry.approval.shell.normalize import normalize_command, splice_quotes
from registry.approval.shell.parse import parse_script


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("\uff52\uff4d \uff0d\uff52\uff46 \uff0f", "rm -rf /"),
        ("\x1b[1;31mrm\x1b[0m -rf", "rm -rf"),
        ("\x1b]0;t\x07ls", "ls"),
        ("r\x00m", "rm"),
        ("a\u200bb\ufeff", "ab"),
        ("rm \\\n-rf", "rm -rf"),
        ("echo \\\\\nls", "echo \\\\\nls"),  # an escaped backslash does not continue the line
        ("rm$IFS-rf", "rm -rf"),
        ("rm${IFS}-rf", "rm -rf"),
        ("cat$IFS$9/etc/passwd", "cat /etc/passwd"),
        ("a\r\nb", "a\nb"),
        ("a\rb", "a\nb"),
        ("a\x0cb", "a b"),
        ("ls -la", "ls -la"),
    ],
)
def test_normalize(raw: str, normal: str) -> None:
    assert normalize_command(raw) == normal
    assert normalize_command(normal) == normal  # idempotent


@pytest.mark.parametrize(
    ("raw", "spliced"),
    [
        ("r''m -rf", "rm -rf"),
        ('r""m', "rm"),
        ('r"m"', "rm"),
        ("\\r\\m", "rm"),
        ("echo 'a b'", "echo 'a b'"),
    ],
)
def test_splice_quotes(raw: str, spliced: str) -> None:
    assert splice_quotes(raw) == spliced


def _argv(src: str) -> list[list[list[str]]]:
    return [[[w.text for w in c.words] for c in p] for p in parse_script(src).pipelines]


def test_lexer_splits_compound_commands() -> None:
    assert _argv("a 1; b 2 && c || d | e\nf & g") == [
        [["a", "1"]],
        [["b", "2"]],
        [["c"]],
        [["d"], ["e"]],
        [["f"]],
        [["g"]],
    ]


def test_lexer_quote_removal_and_substitutions() -> None:
    script = parse_script("r''m \"a b\" 'c d' $'\\x41' \"$(x y)\" `z` <(p q) ${v:-$(w)}")
    words = script.pipelines[0][0].words
    assert [w.text for w in words[:4]] == ["rm", "a b", "c d", "A"]
    assert words[4].subs == ["x y"] and words[5].subs == ["z"]
    assert words[6].subs == ["p q"] and words[7].subs == ["w"]
    assert script.balanced


def test_lexer_redirects_and_heredocs() -> None:
    script = parse_script("cat <<'EOF' > out 2>&1\n$(not run)\nEOF\ncat <<EOF\n$(run)\nEOF")
    first, second = script.pipelines[0][0], script.pipelines[1][0]
    ops = [(r.op, r.fd, r.target.text) for r in first.redirects]
    assert ops == [("<<", None, "EOF"), (">", None, "out"), (">&", "2", "1")]
    assert first.redirects[0].body == "$(not run)" and first.redirects[0].subs == []
    assert second.redirects[0].subs == ["run"]
    assert first.redirects[1].writes and first.redirects[1].truncates
    assert not first.redirects[2].writes


def test_lexer_assignments_and_comments() -> None:
    script = parse_script('A="x y" B=1 cmd arg # rm -rf /')
    cmd = script.pipelines[0][0]
    assert [w.text for w in cmd.assigns] == ["A=x y", "B=1"]
    assert [w.text for w in cmd.words] == ["cmd", "arg"]


@pytest.mark.parametrize(
    "src", ["echo 'open", 'echo "open', "echo $(open", "echo `open", "echo ${open"]
)
def test_lexer_unbalanced_is_reported_not_raised(src: str) -> None:
    assert parse_script(src).balanced is False
