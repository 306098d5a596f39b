"""The walk over one command string: every simple command, at every depth, matched by the rules.

Contract: :class:`Analyzer` normalises and parses a script, expands each
simple command's words with what it knows about variables and the working
directory (:mod:`registry.approval.shell.expand`), follows state that later
commands depend on (assignments, ``cd``, ``set --``, ``read <<<``, ``for``
lists, files written with known content), matches every resulting command
against the hardline and dangerous rules, then analyses every nested script
(``bash -c``, ``eval``, substitutions, heredocs into shells, side channels)
the same way. All work is charged to a :class:`~registry.approval.limits.Budget`;
when it runs out the walk stops and records ``analysis_budget_exhausted``.
Never raises for any ``str``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from registry.approval.limits import Budget
from registry.approval.rules import DANGEROUS_PATTERNS, HARDLINE_PATTERNS
from registry.approval.rules.fallback import FLAT_PATTERNS
from registry.approval.rules.forkbomb import (
    FORK_BOMB,
    is_background_loop_text,
    is_fork_bomb_code,
    is_fork_bomb_text,
)
from registry.approval.shell.channels import COMMAND_VARIABLES
from registry.approval.shell.dataflow import inline_code
from registry.approval.shell.effects import apply_effects, record_writes
from registry.approval.shell.expand import Vars, expand_assignment, expand_words
from registry.approval.shell.nested import nested_scripts
from registry.approval.shell.normalize import has_controls, normalize_command, splice_quotes
from registry.approval.shell.parse import parse_script
from registry.approval.shell.resolve import Cmd, resolve
from registry.approval.shell.state import Context
from registry.approval.shell.substitute import substitution_output
from registry.approval.shell.syntax import SimpleCommand, Word

__all__ = ["BACKGROUND_LOOP", "BUDGET", "NESTING", "Analyzer", "Finding"]

MAX_DEPTH = 8
NESTING = ("nesting_too_deep", "command nests scripts too deeply to analyse")
BUDGET = (
    "analysis_budget_exhausted",
    "command too large or complex to analyse completely; approval needed",
)
BACKGROUND_LOOP = (
    "background_job_loop",
    "endless loop starting background jobs (while true; do x & done)",
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One matched pattern: stable ``key``, human ``description``, ``hardline`` flag."""

    key: str
    description: str
    hardline: bool


class Analyzer:
    """Walks a script and everything nested in it, collecting findings (module docstring)."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        protected: tuple[str, ...] = (),
        budget: Budget | None = None,
    ) -> None:
        self.env = env
        self.ctx = Context(home=(env or {}).get("HOME"), protected=protected)
        self.budget = budget or Budget()
        self.normalized = ""  # of the top-level script
        self.findings: dict[str, Finding] = {}
        self.notices: dict[str, Finding] = {}  # routine matches: no approval, deny rules apply
        self.segments: list[str] = []
        self.commands = 0
        self.scripts = 0
        self.balanced = True

    def add(self, key: str, description: str, hardline: bool) -> None:
        prev = self.findings.get(key)
        if prev is None or (hardline and not prev.hardline):
            self.findings[key] = Finding(key, description, hardline)

    def analyze(self, command: str) -> None:
        """Analyse ``command`` (and, when it holds control bytes, its other reading)."""
        vars = Vars(env=self.env, cwd=(self.env or {}).get("PWD"))
        try:
            self.run(command, 0, vars)
            if has_controls(command) and not self.budget.exhausted:
                self.run(normalize_command(command, controls="drop"), 1, vars)
        except RecursionError:
            self.add(*NESTING, False)
        if self.budget.exhausted:
            self.add(*BUDGET, False)

    def run(self, text: str, depth: int, vars: Vars) -> None:
        """Analyse one script at nesting ``depth`` with the variables known so far."""
        self.scripts += 1
        if depth > MAX_DEPTH:
            self.add(*NESTING, False)
            return
        if not self.budget.spend_script(len(text)):
            return
        norm = normalize_command(text)
        if depth == 0:
            self.normalized = norm
        parsed = parse_script(norm, max_items=max(1, self.budget.items))
        self.budget.spend_items(parsed.items)
        if parsed.truncated:
            self.budget.exhausted = True  # analyse the part that was read, then fail closed
        if not parsed.balanced:
            self.balanced = False
        nested: list[str] = []
        for pipeline in parsed.pipelines:
            cmds: list[Cmd] = []
            for sc in pipeline:
                if not self.budget.spend_command():
                    break
                cmds.extend(self._commands(sc, vars, nested))
            for idx, cmd in enumerate(cmds):
                cmd.pipeline = cmds
                cmd.index = idx
            for cmd in cmds:
                self.match(cmd)
                nested.extend(nested_scripts(cmd))
                record_writes(cmd)
            if self.budget.commands < 0:
                break
        code = " ".join(t for _, t in parsed.tokens)
        if is_fork_bomb_text(code):
            self.add(*FORK_BOMB, True)
        if is_background_loop_text(code):
            self.add(*BACKGROUND_LOOP, False)
        if not parsed.balanced:
            flat = splice_quotes(norm)
            for key, rx, desc in FLAT_PATTERNS:
                if rx.search(flat):
                    self.add(key, desc, False)
        for script in nested:
            if self.budget.exhausted:
                return
            if script.strip():
                self.run(script, depth + 1, vars)

    def _commands(self, sc: SimpleCommand, vars: Vars, nested: list[str]) -> list[Cmd]:
        """The effective commands of one simple command (one per expansion variant)."""
        for w in (*sc.assigns, *sc.words):
            nested.extend(w.subs)
        for r in sc.redirects:
            nested.extend(r.target.subs)
            nested.extend(r.subs)
        prefix: dict[str, str] = {}
        for a in sc.assigns:
            assigned = expand_assignment(a, vars, substitution_output)
            if assigned is None:
                continue
            name, values, items, unknown, append = assigned
            if name in COMMAND_VARIABLES:
                nested.extend(values)
            if sc.words:
                prefix[name] = values[0] if values else ""
            elif items is not None:
                vars.assign_array(name, items, unknown)
            else:
                vars.assign(name, values, unknown, append)
        for r in sc.redirects:
            if r.target.expands:
                expanded = expand_words([r.target], vars, substitution_output, drop_empty=False)
                targets = expanded[0][0] if expanded[0] else []
                if len(targets) == 1:
                    r.target = targets[0]
        if not sc.words:
            # An assignment alone acts like "export NAME=value" for the rules (HISTFILE=...).
            texts = [a.text for a in sc.assigns]
            words = [Word("export", "export"), *(Word(t, t) for t in texts)]
            cmd = resolve(words, sc.redirects) if texts else resolve([], sc.redirects)
            return self._finish([cmd] if cmd else [], vars, prefix)
        variants, capped = expand_words(sc.words, vars, substitution_output)
        if capped:
            self.add("dynamic_command", "too many possible expansions to analyse each", False)
        cmds: list[Cmd] = []
        for words in variants:
            apply_effects(words, sc.redirects, vars)
            cmd = resolve(words, sc.redirects)
            if cmd is not None:
                cmds.append(cmd)
        return self._finish(cmds, vars, prefix)

    def _finish(self, cmds: list[Cmd], vars: Vars, prefix: dict[str, str]) -> list[Cmd]:
        for cmd in cmds:
            cmd.ctx = self.ctx
            cmd.cwd = vars.cwd
            cmd.env_assigns = prefix
            self.commands += 1
            self.segments.append(" ".join(cmd.wrapper_args + cmd.argv).strip())
            if cmd.wrappers:
                self.segments.append(" ".join(cmd.argv))
        return cmds

    def match(self, cmd: Cmd) -> None:
        name = cmd.name
        for p in HARDLINE_PATTERNS:
            if (p.names is None or name in p.names) and p.match(cmd):
                self.add(p.key, p.description, True)
        for p in DANGEROUS_PATTERNS:
            if p.names is not None and name not in p.names:
                continue
            if p.match(cmd):
                self.add(p.key, p.description, False)
            elif p.routine is not None and p.key not in self.notices and p.routine(cmd):
                self.notices[p.key] = Finding(p.key, p.description, False)
        code = inline_code(cmd)
        if code and is_fork_bomb_code(code):
            self.add(*FORK_BOMB, True)
