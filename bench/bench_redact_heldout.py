"""Share of a held-out set of secrets that sbx's redactor catches, now and at an older revision.

Run from the repository root::

    python -m bench.bench_redact_heldout [--before REV] [--misses]

The cases -- the shapes of the reference implementation's own redaction tests
(``bench/redact_heldout_reference.py``) and of public secret scanners' rules
(``bench/redact_heldout_scanner.py``) -- are never used by the test suite.  A
positive is *caught* when no 8-character window of its secret
survives, and caught *cleanly* when its listed context survives too; a
negative is *kept* when it comes back unchanged.

``--before REV`` runs the redactor as it was at ``REV`` (``git archive`` of
``process_registry/`` into a temporary directory, imported in a child
process) on the same cases, side by side.  By default REV is the last commit
before the redactor became a package, when the history has one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

from bench.redact_heldout_reference import REFERENCE
from bench.redact_heldout_scanner import SCANNER
from bench.redact_heldout_shapes import Case
from process_registry.redact import redact_text

CASES: list[Case] = [*REFERENCE, *SCANNER]
_WINDOW = 8
_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from process_registry.redact import redact_text
print(json.dumps([redact_text(t) for t in json.load(sys.stdin)]))
"""


def leaked(case: Case, out: str) -> bool:
    """Whether any 8-character window of a secret of ``case`` is in ``out``.

    A window that the case's text also holds outside the secret (``password``
    in ``db.password=hunter2verylongpassword``) proves nothing and is skipped.
    """
    for secret in case.secrets:
        context = case.text.replace(secret, "\0")
        n = min(_WINDOW, len(secret))
        windows = {secret[i : i + n] for i in range(len(secret) - n + 1)}
        if any(w in out and w not in context for w in windows):
            return True
    return False


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def default_before() -> str | None:
    """Parent of the commit that removed ``process_registry/redact_patterns.py``, if any."""
    try:
        removed = _git("log", "-1", "--diff-filter=D", "--format=%H", "--",
                       "process_registry/redact_patterns.py")
    except (OSError, subprocess.CalledProcessError):
        return None
    return _git("rev-parse", f"{removed}^") if removed else None


def redact_at(rev: str, texts: Sequence[str]) -> list[str]:
    """``redact_text`` of the redactor at git revision ``rev``, run in a child process."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", rev, "process_registry"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        done = subprocess.run([sys.executable, "-c", _CHILD, tmp], input=json.dumps(texts),
                              capture_output=True, text=True, check=True)
    result: list[str] = json.loads(done.stdout)
    return result


def score(cases: Sequence[Case], outs: Sequence[str]) -> dict[str, tuple[int, int, int, int, int]]:
    """Per source: (positives, caught, caught cleanly, negatives, kept)."""
    table: dict[str, list[int]] = {}
    for case, out in zip(cases, outs, strict=True):
        row = table.setdefault(case.source, [0, 0, 0, 0, 0])
        if case.positive:
            caught = not leaked(case, out)
            row[0] += 1
            row[1] += caught
            row[2] += caught and all(k in out for k in case.keep)
        else:
            row[3] += 1
            row[4] += out == case.text
    table["all"] = [sum(col) for col in zip(*table.values(), strict=True)]
    return {k: (v[0], v[1], v[2], v[3], v[4]) for k, v in table.items()}


def _pct(a: int, b: int) -> str:
    return f"{a:>3}/{b:<3} {100 * a / b:5.1f}%" if b else "-"


def report(name: str, scores: dict[str, tuple[int, int, int, int, int]]) -> None:
    for source, (pos, caught, clean, neg, kept) in scores.items():
        print(f"{name:<10} {source:<10} caught {_pct(caught, pos)}   "
              f"cleanly {_pct(clean, pos)}   negatives kept {_pct(kept, neg)}")


def misses(cases: Sequence[Case], outs: Sequence[str], show: Callable[[str], None]) -> None:
    for case, out in zip(cases, outs, strict=True):
        if case.positive and leaked(case, out):
            show(f"  missed  {case.source}/{case.id}: {out[:100]!r} {case.note}")
        elif case.positive and not all(k in out for k in case.keep):
            show(f"  context {case.source}/{case.id}: {out[:100]!r}")
        elif not case.positive and out != case.text:
            show(f"  changed {case.source}/{case.id}: {out[:100]!r} {case.note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default=default_before(),
                    help="git revision to compare with (default: before the redact package)")
    ap.add_argument("--misses", action="store_true", help="list what is missed or changed")
    args = ap.parse_args()

    texts = [c.text for c in CASES]
    now = [redact_text(t) for t in texts]
    print(f"{len(CASES)} held-out cases: "
          f"{sum(c.positive for c in CASES)} positives, "
          f"{sum(not c.positive for c in CASES)} negatives")
    if args.before:
        before = redact_at(args.before, texts)
        report(f"before ({args.before[:12]})", score(CASES, before))
    report("now", score(CASES, now))
    if args.misses:
        misses(CASES, now, print)


if __name__ == "__main__":
    main()
