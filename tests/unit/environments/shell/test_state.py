"""What of a command's reported environment becomes the session's."""

from __future__ import annotations

from environments.shell.state import DumpParser, adopted_env


def test_a_per_call_value_is_not_kept_unless_the_command_changed_it() -> None:
    session = {"KEEP": "1", "SHADOWED": "session"}
    overrides = {"SHADOWED": "call", "ONLY_CALL": "x", "CHANGED": "call"}
    reported = {
        "KEEP": "1",
        "SHADOWED": "call",
        "ONLY_CALL": "x",
        "CHANGED": "by the command",
        "NEW": "exported",
        "PWD": "/tmp",
        "SHLVL": "2",
        "__sbx_a": "a command's own",
    }
    assert adopted_env(reported, overrides, session) == {
        "KEEP": "1",
        "SHADOWED": "session",
        "CHANGED": "by the command",
        "NEW": "exported",
    }
    assert reported["SHADOWED"] == "call"  # the report itself is left alone


def test_a_dump_parse_is_reused_and_handed_out_as_a_copy() -> None:
    parser = DumpParser()
    dump = b'declare -x A="1"\ndeclare -x B="two words"\n'
    first = parser.parse(dump)
    assert first == {"A": "1", "B": "two words"}
    first["A"] = "changed by the caller"
    assert parser.parse(dump) == {"A": "1", "B": "two words"}
    assert parser.parse(b'declare -x C="3"\n') == {"C": "3"}
