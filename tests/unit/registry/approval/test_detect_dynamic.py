"""Command words that cannot be resolved statically, and the session's known environment.

The detector resolves what it can: variables assigned earlier in the command,
the session's exported environment (``env=``), static substitutions, ``set --``,
arrays, ``IFS`` changes, ``read <<<``, ``printf -v``, parameter operators,
brace expansion, the followed working directory. What stays unknown needs
approval, and is hardline when its targets are.
"""

from __future__ import annotations

import pytest

from registry.approval import analyze_command, detect_dangerous_command

from .detection import assert_allowed, assert_detected

SESSION = {"HOME": "/home/dev", "PWD": "/home/dev/app", "X": "rm", "EDITOR": "vim", "N": "3"}

RESOLVED: list[tuple[str, str]] = [
    # values assigned in the same command
    ("a=rm; $a -rf /", "delete_root"),
    ("c=reboot; sudo $c", "shutdown"),
    ("x=$(echo rm); $x -rf /", "delete_root"),
    ("$(echo rm) -rf /", "delete_root"),
    ("`printf rm` -rf /", "delete_root"),
    ("`printf '\\x72\\x6d'` -rf ~", "delete_root"),
    ("c=$(echo cm0= | base64 -d); $c -rf /", "delete_root"),
    ("$(which rm) -rf /", "delete_root"),
    ("IFS=,; c=rm,-rf,/; $c", "delete_root"),
    ('a=(rm -rf /); "${a[@]}"', "delete_root"),
    ("a=(ls rm); ${a[1]} -rf ~", "delete_root"),
    ('set -- rm -rf /; "$@"', "delete_root"),
    ("set -- git push --force; $1 $2 $3", "git_force_push"),
    ("X=RM; ${X,,} -rf /", "delete_root"),
    ("p=/us; q=r; rm -rf $p$q", "delete_root"),
    ("X=/usr/lib/x; rm -rf ${X%/*}", "delete_root"),
    ("d=/etc/nginx; rm -rf ${d%/nginx}", "delete_root"),
    ("x=rmdir; ${x/dir/} -rf /", "delete_root"),
    ("x=xxrm; ${x#xx} -rf ~", "delete_root"),
    ("x=rm; ${x:0:2} -rf /", "delete_root"),
    ("read -r c <<< rm; $c -rf /", "delete_root"),
    ("printf -v c '%s' rm; $c -rf ~", "delete_root"),
    ("declare c=rm; $c -rf /", "delete_root"),
    ("export c=rm; $c -rf /", "delete_root"),
    ("n=c; c=rm; ${!n} -rf /", "delete_root"),
    ("for c in rm; do $c -rf /; done", "delete_root"),
    ("mapfile -t a <<< rm; ${a[0]} -rf /", "delete_root"),
    ("rm -rf {/etc,/usr}", "delete_root"),
    ("rm -rf /{e,u}*", "delete_root"),
    ("cd / && rm -rf *", "delete_root"),
    ("cd /usr && rm -rf lib", "delete_root"),
    ("cd ~ && rm -rf .[!.]* *", "delete_root"),
    ("cd /etc; find . -delete", "delete_root"),
    ("x=$HOME; rm -rf $x", "delete_root"),
    ("x=${HOME%/*}; rm -rf $x", "delete_root"),
    ("sh -c \"$(printf 'rm -rf /')\"", "delete_root"),
    ("eval \"$(echo 'rm -rf /')\"", "delete_root"),
    ("s='rm -rf src'; eval $s", "recursive_delete"),
    ("x=git; y=clean; $x $y -fdx", "git_clean"),
]

UNRESOLVED: list[tuple[str, str]] = [
    ("$X -rf src", "dynamic_command"),
    ("${RM} build", "dynamic_command"),
    ("$CMD", "dynamic_command"),
    ('"$TOOL" --apply', "dynamic_command"),
    ("$(cat cmd.txt) src", "dynamic_command"),
    ("${RM:-rm} -rf src", "recursive_delete"),
    ('eval "$SCRIPT"', "dynamic_command"),
    ("eval $1", "dynamic_command"),
    ('sh -c "$PAYLOAD"', "dynamic_command"),
    ('bash -c "$1"', "dynamic_command"),
    ("source $F", "dynamic_command"),
    ('x=$(cat f); eval "$x"', "dynamic_command"),
    ("rm $FILES", "dynamic_arguments"),
    ("kill -9 $PID", "dynamic_arguments"),
    ("chmod $MODE app.sh", "dynamic_arguments"),
    ("git push $FLAGS origin main", "dynamic_arguments"),
    ("find . $EXPR -delete", "find_delete"),
    ("$X -rf /", "dynamic_root_target"),
    ("${RM:-rm} -rf /", "delete_root"),
    ('"$(cat c)" -rf ~', "dynamic_root_target"),
    ("$1 --recursive /etc", "dynamic_root_target"),
    ("$X rm -rf /", "dynamic_root_target"),
]

WITH_SESSION_ENV: list[tuple[str, str]] = [
    ("$X -rf /", "delete_root"),
    ("$X -rf src", "recursive_delete"),
    ("$X -rf $HOME", "delete_root"),
    ("rm -rf /home/dev", "delete_root"),
    ("rm -rf /home/dev/*", "delete_root"),
    ("rm -rf ${PWD%/*}", "delete_root"),
    ("cd .. && rm -rf *", "delete_root"),
    ("rm -rf $PWD", "recursive_delete"),
]

ALLOWED_WITH_SESSION_ENV: list[str] = [
    "$EDITOR notes.md",
    "head -n $N file",
    "rm -rf $PWD/node_modules",
    "echo $X",
]


@pytest.mark.parametrize(("command", "key"), RESOLVED + UNRESOLVED)
def test_detected(command: str, key: str) -> None:
    assert_detected(command, key)


@pytest.mark.parametrize(("command", "key"), WITH_SESSION_ENV)
def test_session_env_resolves(command: str, key: str) -> None:
    assert_detected(command, key, env=SESSION)


@pytest.mark.parametrize("command", ALLOWED_WITH_SESSION_ENV)
def test_session_env_allows(command: str) -> None:
    assert_allowed(command, env=SESSION)


def test_unknown_variable_needs_approval_without_env_and_resolves_with_it() -> None:
    assert detect_dangerous_command("$EDITOR notes.md")[1] == "dynamic_command"
    assert detect_dangerous_command("$EDITOR notes.md", env={"EDITOR": "vim"}) == (
        False,
        None,
        None,
    )


def test_cached_results_follow_the_environment() -> None:
    # The same text with different exported values must not share a cached verdict.
    assert detect_dangerous_command("$X -rf src", env={"X": "ls"}) == (False, None, None)
    assert detect_dangerous_command("$X -rf src", env={"X": "rm"})[1] == "recursive_delete"


def test_unresolved_command_also_reports_what_its_default_would_do() -> None:
    keys = [f.key for f in analyze_command("${RM:-rm} -rf src").findings]
    assert keys[:2] == ["recursive_delete", "dynamic_command"]
