"""Obfuscation: text-level tricks that hide a command from a reader or a regex.

Unicode forms, ANSI/OSC escapes, NUL and other control bytes inside words,
$IFS in every position, backslash-newline joins, quote splicing, ANSI-C
quoting, brace expansion, wrappers and every way of handing a script to
another shell or interpreter.
"""

from __future__ import annotations

import base64

import pytest

from .detection import assert_detected

OBFUSCATED: list[tuple[str, str]] = [
    ("\uff52\uff4d -rf /", "delete_root"),  # fullwidth letters
    ("\uff53\uff48\uff55\uff54\uff44\uff4f\uff57\uff4e now", "shutdown"),
    ("\x1b[31mrm\x1b[0m -rf /", "delete_root"),  # ANSI colour codes
    ("r\x1b[0mm -rf ~", "delete_root"),
    ("\x1b]0;title\x07reboot", "shutdown"),  # OSC title sequence
    ("rm\x00 -rf /", "delete_root"),  # NUL byte
    ("r\x00m -rf src", "recursive_delete"),
    ("rm$IFS-rf$IFS/", "delete_root"),
    ("rm${IFS}-rf${IFS}/etc", "delete_root"),
    ("cat$IFS$9/dev/zero>/dev/sda", "block_device_write"),
    ("r''m -rf /", "delete_root"),  # quote splicing
    ('r""m -rf /', "delete_root"),
    ('r"m" -rf /', "delete_root"),
    ("'rm' -rf /", "delete_root"),
    ("\\rm -rf /", "delete_root"),
    ("\\r\\m -rf /", "delete_root"),
    ("s''hutdown -h now", "shutdown"),
    ('k"il"l -9 -1', "kill_all_processes"),
    ("rm -r\\\nf /", "delete_root"),  # backslash-newline
    ("rm \\\n-rf \\\n/", "delete_root"),
    ("shut\\\ndown now", "shutdown"),
    ("$'\\x72\\x6d' -rf /", "delete_root"),  # ANSI-C quoting
    ("$'\\162\\155' -rf ~", "delete_root"),
    ("{rm,-rf,/}", "delete_root"),  # brace expansion
    ("a=rm; $a -rf /", "delete_root"),  # variable indirection
    ("c=reboot; sudo $c", "shutdown"),
    ("x=$(echo rm); $x -rf /", "delete_root"),
    ("$(echo rm) -rf /", "delete_root"),
    ("`printf rm` -rf /", "delete_root"),
    ("r\u200bm -rf /", "delete_root"),  # zero-width space
    ("echo cm0gLXJmIC8= | base64 -d | sh", "delete_root"),  # decoded payload analysed
    ("sh -c 'rm -rf /'", "delete_root"),
    ('bash -lc "sudo rm -rf /"', "delete_root"),
    ("eval 'rm -rf /'", "delete_root"),
    ('echo "$(rm -rf ~)"', "delete_root"),
    ("echo `reboot`", "shutdown"),
    ("cat <(rm -rf /)", "delete_root"),
    ("echo 'rm -rf /' | bash", "delete_root"),
    ("bash <<EOF\nrm -rf /\nEOF", "delete_root"),
    ("sh <<< 'mkfs.ext4 /dev/sda'", "format_filesystem"),
    ("cat <<EOF | sh\nreboot\nEOF", "shutdown"),
    ("cat <<EOF\n$(rm -rf /)\nEOF", "delete_root"),
    ("xargs -a list sh -c 'rm -rf /'", "delete_root"),
    ("find . -exec sh -c 'kill -9 -1' \\;", "kill_all_processes"),
    ("ssh host 'rm -rf /'", "delete_root"),
    ("docker exec web rm -rf /", "delete_root"),
    ("docker run --rm alpine sh -c 'rm -rf /'", "delete_root"),
    ("kubectl exec pod -- rm -rf /", "delete_root"),
    ("env -i PATH=/bin rm -rf /", "delete_root"),
    ("env -S 'rm -rf /'", "delete_root"),
    ("timeout 10 nice -n 5 nohup rm -rf /", "delete_root"),
    ("command rm -rf /", "delete_root"),
    ("exec reboot", "shutdown"),
    ("busybox rm -rf /", "delete_root"),
    ("su -c 'rm -rf /'", "delete_root"),
    ("su root -c 'shutdown now'", "shutdown"),
    ("watch -n 1 'rm -rf /'", "delete_root"),
    ("trap 'rm -rf ~' EXIT", "delete_root"),
    ("if true; then rm -rf /; fi", "delete_root"),
    ("for f in a b; do rm -rf /; done", "delete_root"),
    ("{ rm -rf /; }", "delete_root"),
    ("(rm -rf /)", "delete_root"),
    ("! rm -rf /", "delete_root"),
    ("ls && (cd x; rm -rf ~)", "delete_root"),
    ("python3 -c \"import os; os.system('rm -rf /')\"", "delete_root"),
    ('python3 -c \'import subprocess; subprocess.run(["rm", "-rf", "/"])\'', "delete_root"),
    ("perl -e 'system(\"reboot\")'", "shutdown"),
    ("ruby -e '`rm -rf ~`'", "delete_root"),
    ("node -e \"require('child_process').execSync('rm -rf /')\"", "delete_root"),
    ("python3 - <<'EOF'\nimport os\nos.system('shutdown now')\nEOF", "shutdown"),
    ("cmd.exe /c rd /s /q C:\\", "delete_root"),
    (
        "powershell -enc " + base64.b64encode("Stop-Computer".encode("utf-16-le")).decode(),
        "shutdown",
    ),
    ("sudo -u root -- rm -rf /", "delete_root"),
    ("nohup sh -c 'dd if=/dev/zero of=/dev/sda' &", "block_device_write"),
    ("echo ok; rm -rf / # cleanup", "delete_root"),
    ("echo 'unbalanced; rm -rf / ", "recursive_delete"),  # unbalanced quotes: flat fallback
    ('psql -c "DROP TABLE x', "sql_drop"),
    # NUL and other control bytes inside a word
    ("d\x00d if=/dev/zero of=/dev/sda", "block_device_write"),
    ("r\x01m -rf /", "delete_root"),
    ("sh\x07utdown now", "shutdown"),
    ("rm -r\x02f /", "delete_root"),
    ("rm -rf \x1b[2K/", "delete_root"),
    ("\x9b31mrm\x9b0m -rf /", "delete_root"),
    # $IFS in every position
    ("${IFS}rm${IFS}-rf${IFS}/", "delete_root"),
    ("rm${IFS%?}-rf${IFS%?}/", "delete_root"),
    ("rm$IFS$9-rf$IFS$9/", "delete_root"),
    ("rm${IFS:0:1}-rf${IFS:0:1}/", "delete_root"),
    ("X=$IFS; rm${X}-rf${X}/", "delete_root"),
    ("IFS=_; c=rm_-rf_/; $c", "delete_root"),
    ("{rm,-rf,/}", "delete_root"),
    ("{rm,-rf,~}", "delete_root"),
    # backslash-newline inside a word and between arguments
    ("r\\\nm -rf /", "delete_root"),
    ("rm -rf \\\n/e\\\ntc", "delete_root"),
    ("mk\\\nfs.ext4 /dev/sda", "format_filesystem"),
    ("reb\\\noot", "shutdown"),
    # unicode and quoting
    ("\uff52\uff4d -\uff52\uff46 /", "delete_root"),
    ("rm -rf \uff0f", "delete_root"),
    ("r\u200bm -rf ~", "delete_root"),
    ("\\r\\m -rf /etc", "delete_root"),
    ("\"r\"'m' -rf /", "delete_root"),
    ("$'r\\u006d' -rf /", "delete_root"),
    ("$'\\162m' -rf /usr", "delete_root"),
]


@pytest.mark.parametrize(("command", "key"), OBFUSCATED)
def test_obfuscated(command: str, key: str) -> None:
    assert_detected(command, key)
