"""Score sbx's detection against another project's public detection test cases.

Run from the repository root, pointing at test files of a project whose tests
call ``detect_dangerous_command``/``detect_hardline_command`` (for example a
checkout of the reference implementation's ``tests/tools/``)::

    python -m bench.bench_approval_reference PATH [PATH ...] [--show wrong|all] [--json]

No case is stored in this repository: the cases are read from the given files
at run time. Each test function is parsed (``ast``, never imported or run);
a case is a literal command handed to ``detect_dangerous_command`` or
``detect_hardline_command`` (directly, through a local variable, a ``for``
loop over literals or a ``pytest.mark.parametrize`` list) together with the
verdict the test asserts on the first element of the result (``is True``,
``is False``, ``assert x``, ``assert not x``, ``== (False, None, None)``,
``[0] is True``). Functions whose verdict cannot be read that way are
skipped and counted.

Prints the share of cases sbx decides as the other project's tests expect,
overall and per verdict; ``--show wrong`` lists the disagreements.
Cases that name the other product (its process names, its home directory)
are reported apart, since sbx cannot share that product's self-protection.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from registry.approval import detect_dangerous_command, detect_hardline_command

_DETECTORS = {"detect_dangerous_command": "dangerous", "detect_hardline_command": "hardline"}
# Words that tie a case to the other product's own processes or files.
_PRODUCT_WORDS = ("hermes", "gateway", "cli.py")


@dataclass(frozen=True)
class Case:
    """One command, which detector the test calls, and the verdict it asserts."""

    source: str
    kind: str  # "dangerous" | "hardline"
    command: str
    expected: bool


def _strings(node: ast.AST | None) -> list[str] | None:
    """Literal strings of a constant, or of a tuple/list of constants (first of each tuple)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr | ast.BinOp):
        return None
    if isinstance(node, ast.Tuple | ast.List):
        out: list[str] = []
        for elt in node.elts:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                out.append(elt.value)
            elif isinstance(elt, ast.Tuple | ast.List) and elt.elts:
                first = elt.elts[0]
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    return None
                out.append(first.value)
            else:
                return None
        return out
    return None


def _bindings(fn: ast.FunctionDef) -> dict[str, list[str]]:
    """Names bound to literal strings in ``fn``: assignments, for-loops, parametrize."""
    bound: dict[str, list[str]] = {}
    for deco in fn.decorator_list:
        if (
            isinstance(deco, ast.Call)
            and getattr(deco.func, "attr", "") == "parametrize"
            and len(deco.args) >= 2
            and isinstance(deco.args[0], ast.Constant)
        ):
            names = [n.strip() for n in str(deco.args[0].value).split(",")]
            values = _strings(deco.args[1])
            if values is not None:
                bound[names[0]] = values
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            values = _strings(node.value)
            if isinstance(target, ast.Name) and values is not None and len(values) == 1:
                bound[target.id] = values
        elif isinstance(node, ast.For):
            values = _strings(node.iter)
            target = node.target
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[0]
            if isinstance(target, ast.Name) and values is not None:
                bound[target.id] = values
    return bound


def _verdict_of(test: ast.expr, names: set[str]) -> bool | None:
    """The asserted value of a result variable in ``names``, or None if not such an assert."""
    if isinstance(test, ast.Name) and test.id in names:
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = test.operand
        if isinstance(inner, ast.Name) and inner.id in names:
            return False
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right = test.left, test.comparators[0]
        if (
            isinstance(left, ast.Name)
            and left.id in names
            and isinstance(right, ast.Constant)
            and isinstance(test.ops[0], ast.Is | ast.Eq)
            and isinstance(right.value, bool)
        ):
            return right.value
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            got = _verdict_of(value, names)
            if got is not None:
                return got
    return None


def _direct_verdict(test: ast.expr) -> tuple[ast.Call, bool] | None:
    """``detect(x) == (False, None, None)`` or ``detect(x)[0] is True`` style asserts."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Subscript) and isinstance(left.value, ast.Call):
        call = left.value
        if isinstance(right, ast.Constant) and isinstance(right.value, bool):
            return call, right.value
    if isinstance(left, ast.Call) and isinstance(right, ast.Tuple) and right.elts:
        first = right.elts[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, bool):
            return left, first.value
    return None


def _detector(call: ast.Call) -> str | None:
    name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
    return _DETECTORS.get(str(name)) if name else None


def _cases_in(fn: ast.FunctionDef, source: str) -> Iterator[Case]:
    bound = _bindings(fn)
    result_names: dict[str, tuple[str, list[str]]] = {}
    direct: list[tuple[str, list[str], bool]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            kind = _detector(node.value)
            if kind is None or not node.value.args:
                continue
            arg = node.value.args[0]
            values = _strings(arg) or (bound.get(arg.id) if isinstance(arg, ast.Name) else None)
            target = node.targets[0]
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[0]
            if isinstance(target, ast.Name) and values:
                result_names[target.id] = (kind, values)
        elif isinstance(node, ast.Assert):
            found = _direct_verdict(node.test)
            if found is not None:
                call, verdict = found
                kind = _detector(call)
                if kind and call.args:
                    arg = call.args[0]
                    values = _strings(arg) or (
                        bound.get(arg.id) if isinstance(arg, ast.Name) else None
                    )
                    if values:
                        direct.append((kind, values, verdict))
    for kind, values, verdict in direct:
        for command in values:
            yield Case(source, kind, command, verdict)
    if not result_names:
        return
    names = set(result_names)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            found_verdict = _verdict_of(node.test, names)
            if found_verdict is None:
                continue
            verdict = found_verdict
            # The verdict applies to every result variable this assert names.
            for name in {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)} & names:
                kind, values = result_names[name]
                for command in values:
                    yield Case(source, kind, command, verdict)


def extract(path: Path) -> tuple[list[Case], int]:
    """Cases of one test file, and how many test functions call a detector but gave none."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    cases: list[Case] = []
    skipped = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            found = list(_cases_in(node, f"{path.name}::{node.name}"))
            calls = any(isinstance(n, ast.Call) and _detector(n) for n in ast.walk(node))
            if calls and not found:
                skipped += 1
            cases.extend(found)
    unique = list(dict.fromkeys(cases))
    return unique, skipped


def decide(case: Case) -> bool:
    """sbx's verdict for ``case`` with the detector the test names."""
    if case.kind == "hardline":
        return detect_hardline_command(case.command)[0]
    return detect_dangerous_command(case.command)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--show", choices=["none", "wrong", "all"], default="none")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    files = [p for path in args.paths for p in ([path] if path.is_file() else path.rglob("*.py"))]
    cases: list[Case] = []
    skipped = 0
    for f in sorted(files):
        found, missed = extract(f)
        cases.extend(found)
        skipped += missed
    if not cases:
        print("no cases found", file=sys.stderr)
        return 1
    rows = []
    for case in cases:
        got = decide(case)
        product = any(w in case.command.lower() for w in _PRODUCT_WORDS)
        rows.append({**asdict(case), "got": got, "ok": got == case.expected, "product": product})
    general = [r for r in rows if not r["product"]]

    def share(subset: list[dict[str, object]]) -> str:
        ok = sum(1 for r in subset if r["ok"])
        return f"{ok}/{len(subset)} ({100.0 * ok / max(1, len(subset)):.1f}%)"

    summary = {
        "cases": len(rows),
        "skipped_functions": skipped,
        "all": share(rows),
        "expected_flagged": share([r for r in rows if r["expected"]]),
        "expected_left_alone": share([r for r in rows if not r["expected"]]),
        "excluding_product_specific": share(general),
    }
    if args.json:
        print(json.dumps({"summary": summary, "cases": rows}, indent=1))
        return 0
    for key, value in summary.items():
        print(f"{key:<28} {value}")
    if args.show != "none":
        for r in rows:
            if args.show == "all" or not r["ok"]:
                mark = "ok " if r["ok"] else "BAD"
                tag = " [product]" if r["product"] else ""
                print(f"{mark} want={r['expected']!s:<5} {r['kind']:<9} {r['command']!r}{tag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
