"""Sets of program names the shell model and the rules share.

Contract: lower-cased basenames (see :func:`registry.approval.shell.resolve.basename`).
"""

from __future__ import annotations

from registry.approval.shell.args import word_set

__all__ = [
    "DATA_COMMANDS",
    "DECODERS",
    "EDITORS",
    "FETCHERS",
    "INTERPRETERS",
    "PID_PRODUCERS",
    "SHELLS",
]

SHELLS = word_set(
    """
    sh bash zsh dash ksh mksh ash fish csh tcsh yash rbash
    """
)
INTERPRETERS = word_set(
    """
    python python2 python3 pypy pypy3 perl ruby node nodejs bun deno php lua rscript osascript
    tclsh jshell
    """
)
FETCHERS = word_set(
    """
    curl wget fetch http https xh aria2c lwp-request get lynx invoke-webrequest iwr
    invoke-restmethod irm curlie httpie ftp tftp
    """
)
DECODERS = word_set(
    """
    base64 base32 basenc xxd openssl tr rev uudecode gunzip zcat bunzip2 xz unxz certutil
    """
)
# Programs whose arguments are text, patterns or names, never a command to run.
DATA_COMMANDS = word_set(
    """
    echo printf grep egrep fgrep rg ag ack zgrep git man info help whatis apropos which type
    whereis cat less more head tail wc ls file stat sort uniq cut diff cmp comm jq yq history
    printenv basename dirname realpath readlink test [ [[ true false : sleep date pwd column fmt
    fold nl tac strings hexdump od md5sum sha1sum sha256sum sha512sum cowsay figlet logger
    notify-send read tldr look expr let tree du df touch mkdir sed awk
    """
)
EDITORS = word_set(
    """
    vi vim nvim view ex gvim mvim vimdiff nvi elvis emacs emacsclient
    """
)
# Programs whose output is process ids (safe to hand to kill: never -1 or a flag).
PID_PRODUCERS = word_set(
    """
    pgrep pidof lsof fuser jobs
    """
)
