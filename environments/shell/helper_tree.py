"""Ending a command's process tree inside a sandbox through a helper command: the
script, and the pass that remembers what earlier passes found."""

from __future__ import annotations

from collections.abc import Callable

from environments.shell.helper_answers import parse_kill_output

KILL_TREE = r"""
sig=$1; root=$2; shift 2
# dash and busybox ash refuse `set -m` without a tty, so the command's subshell
# is not always a group leader: collect its tree by parent pid, plus members of
# its process group (bash) that were reparented, plus pids an earlier pass saw.
pids=" $root $* "
changed=1
while [ "$changed" = 1 ]; do
  changed=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$pids" in *" $p "*) continue;; esac
    { read -r s < "$d/stat"; } 2>/dev/null || continue
    s=${s##*) }
    set -- $s
    case "$pids" in *" $2 "*) pids="$pids$p "; changed=1; continue;; esac
    [ "$3" = "$root" ] && { pids="$pids$p "; changed=1; }
  done
done
[ "$sig" = 0 ] || kill -"$sig" -"$root" 2>/dev/null
alive=
for p in $pids; do
  { read -r s < "/proc/$p/stat"; } 2>/dev/null || continue
  s=${s##*) }
  set -- $s
  [ "$1" = Z ] && continue
  kill -"$sig" "$p" 2>/dev/null && alive="$alive $p"
done
echo "sbx-pids$pids"
echo "sbx-alive$alive"
exit 0
"""
"""Args: ``SIGNUM ROOT_PID [PID...]``. Signals ROOT's group, ROOT, its descendants, reparented
members of its group and the extra PIDs (found by an earlier pass). Signal 0 only probes.
Prints ``sbx-pids`` (every pid considered) and ``sbx-alive`` (the live ones signalled)."""



def kill_tree(
    helper: Callable[[str, list[str]], tuple[int, bytes]],
    memory: dict[int, set[int]],
    pgid: int,
    signum: int,
) -> None:
    """``kill_group`` for :class:`~environments.shell.driver.SessionShell` through a helper runner.

    ``memory`` keeps, per group, the pids seen by earlier passes: once TERM killed
    the subshell its TERM-ignoring children are reparented and only found that way.
    Raises ``ProcessLookupError`` when nothing of the tree is alive (the contract
    SessionShell relies on when it probes with signal 0).
    """
    known = memory.setdefault(pgid, set())
    _, out = helper(KILL_TREE, [str(signum), str(pgid), *map(str, sorted(known - {pgid}))])
    seen, alive = parse_kill_output(out.decode(errors="replace"))
    known.update(seen)
    if not alive:
        raise ProcessLookupError(f"no process of group {pgid} is alive")
