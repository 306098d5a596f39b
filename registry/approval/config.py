"""The approval policy: read once, replaced only on an explicit reload.

Contract: :class:`ApprovalConfigSource` reads a YAML file (``$SBX_HOME/config.yaml``
by convention) with these keys, every one optional::

    command_allowlist: [recursive_delete, "npm run build*"]  # pattern keys or literal/glob commands
    command_denylist: ["git push --force*", package_uninstall]  # wins over everything
    approvals:
      mode: manual            # manual | smart | off
      timeout: 300            # seconds a pending approval stays answerable
      once_ttl: 600           # seconds an approved-once command stays runnable
      max_command_bytes: 65536  # longer commands are refused before analysis
      protected_paths: []     # writes to (or deletes of) these need approval
      backend_policy: {docker: allow, modal: [recursive_delete]}   # default: check
      judge:                  # OpenAI-compatible endpoint for smart mode
        url: "http://127.0.0.1:8000/v1"
        model: "gpt-4o-mini"
        api_key_env: SBX_JUDGE_API_KEY   # or api_key: ...
        timeout: 10

:meth:`ApprovalConfigSource.get` returns the policy read at start; a changed file
takes effect on :meth:`~ApprovalConfigSource.reload` only (the operator's signal:
a file a sandbox could reach must never weaken a running worker silently), and
what a reload loosens is logged at warning level (:func:`loosened`). A policy that
fails to parse on the first load raises :class:`ApprovalConfigError`; on a reload,
the one in force stays (a half-written edit must not drop the deny rules). The
worker never writes the policy: "always" approvals live in the approval store.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from registry.approval.detect import ALL_PATTERN_KEYS, Analysis
from registry.approval.limits import DEFAULT_MAX_COMMAND_BYTES

__all__ = [
    "ApprovalConfigError",
    "ApprovalConfigSource",
    "ApprovalSettings",
    "JudgeSettings",
    "Rules",
]

log = logging.getLogger(__name__)

Mode = Literal["manual", "smart", "off"]


class ApprovalConfigError(ValueError):
    """The approval configuration file cannot be read or is invalid."""


class JudgeSettings(BaseModel):
    """OpenAI-compatible judge endpoint for ``smart`` mode."""

    model_config = ConfigDict(extra="forbid")

    url: str
    model: str = "gpt-4o-mini"
    api_key: str | None = Field(default=None, repr=False)
    api_key_env: str | None = None
    timeout: float = Field(default=10.0, gt=0)

    def resolved_api_key(self) -> str | None:
        """The API key, from ``api_key`` or the environment variable named by ``api_key_env``."""
        if self.api_key:
            return self.api_key
        return os.environ.get(self.api_key_env) if self.api_key_env else None


class ApprovalSettings(BaseModel):
    """Validated approval configuration (see module docstring)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    mode: Mode = "manual"
    timeout: float = Field(default=300.0, gt=0)
    once_ttl: float = Field(default=600.0, gt=0)
    max_command_bytes: int = Field(default=DEFAULT_MAX_COMMAND_BYTES, ge=1024, le=16 * 1024 * 1024)
    protected_paths: list[str] = Field(default_factory=list)
    backend_policy: dict[str, Literal["allow", "check"] | list[str]] = Field(default_factory=dict)
    judge: JudgeSettings | None = None
    command_allowlist: list[str] = Field(default_factory=list)
    command_denylist: list[str] = Field(default_factory=list)

    @classmethod
    def from_document(cls, doc: Any) -> ApprovalSettings:
        """Build from a parsed YAML document (top-level mapping or None)."""
        if doc is None:
            doc = {}
        if not isinstance(doc, dict):
            raise ApprovalConfigError("config root must be a mapping")
        approvals = doc.get("approvals") or {}
        if not isinstance(approvals, dict):
            raise ApprovalConfigError("'approvals' must be a mapping")
        data = dict(approvals)
        if data.get("mode") is False:
            data["mode"] = "off"  # YAML 1.1 reads a bare `mode: off` as false
        for key in ("command_allowlist", "command_denylist"):
            value = doc.get(key, approvals.get(key))
            if value is not None:
                data[key] = [str(v) for v in value] if isinstance(value, list) else value
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ApprovalConfigError(str(exc)) from exc

    def relaxed_keys(self, backend: str) -> frozenset[str] | Literal["all"]:
        """Non-hardline keys that need no approval on ``backend`` (explicit config only)."""
        policy = self.backend_policy.get(backend)
        if policy == "allow":
            return "all"
        if isinstance(policy, list):
            return frozenset(policy)
        return frozenset()


def _collapse(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True, slots=True)
class Rules:
    """Allow/deny entries split into pattern keys and command globs."""

    allow_keys: frozenset[str]
    allow_globs: tuple[str, ...]
    deny_keys: frozenset[str]
    deny_globs: tuple[str, ...]

    @classmethod
    def from_settings(cls, settings: ApprovalSettings) -> Rules:
        def split(entries: list[str]) -> tuple[frozenset[str], tuple[str, ...]]:
            keys = {e.strip() for e in entries if e.strip() in ALL_PATTERN_KEYS}
            globs = tuple(
                _collapse(e) for e in entries if e.strip() and e.strip() not in ALL_PATTERN_KEYS
            )
            return frozenset(keys), globs

        ak, ag = split(settings.command_allowlist)
        dk, dg = split(settings.command_denylist)
        return cls(ak, ag, dk, dg)

    def denied(self, analysis: Analysis) -> str | None:
        """The deny entry that matches ``analysis``, else None.

        A key entry matches any finding with that key. A text entry matches the
        whole command or any simple command inside it, exactly or followed by
        more arguments (deny ``git push`` also denies ``git push origin``).
        """
        for f in (*analysis.findings, *analysis.notices):
            if f.key in self.deny_keys:
                return f.key
        if not self.deny_globs:
            return None
        texts = {_collapse(analysis.normalized), *(_collapse(s) for s in analysis.segments)}
        for entry in self.deny_globs:
            for text in texts:
                if fnmatch.fnmatchcase(text, entry) or fnmatch.fnmatchcase(text, entry + " *"):
                    return entry
        return None

    def allowed_text(self, analysis: Analysis) -> bool:
        """True if a literal/glob allow entry matches; never for a compound command."""
        if not self.allow_globs or not analysis.simple:
            return False
        text = _collapse(analysis.normalized)
        return any(fnmatch.fnmatchcase(text, entry) for entry in self.allow_globs)


class ApprovalConfigSource:
    """The approval policy in force: read once, replaced only by :meth:`reload`.

    ``document()`` returns the policy as config.yaml spells it (the worker passes its
    settings' reader); without one, ``path`` is read as YAML (None: defaults only).
    ``overrides`` (e.g. ``{"mode": "off"}`` from worker settings) replace
    ``approvals.*`` values. A change to the file takes effect on :meth:`reload` only
    -- an operator's explicit signal, never a write a sandbox might make -- and a
    reload that loosens the policy is logged at warning level, saying what loosened.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        overrides: dict[str, Any] | None = None,
        document: Callable[[], Any] | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self._document = document
        self._overrides = dict(overrides or {})
        self._lock = threading.Lock()
        self._settings, self._rules = self._load(first=True)

    def _read(self) -> Any:
        if self._document is not None:
            return self._document()
        if self.path is None:
            return {}
        try:
            return yaml.safe_load(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}

    def _load(self, first: bool = False) -> tuple[ApprovalSettings, Rules]:
        try:
            settings = ApprovalSettings.from_document(self._read())
        except (OSError, ValueError, yaml.YAMLError) as exc:
            if first:
                raise ApprovalConfigError(f"cannot load the approval policy: {exc}") from exc
            log.warning("approval policy unreadable, keeping the one in force: %s",
                        type(exc).__name__)  # fmt: skip
            return self._settings, self._rules
        if self._overrides:
            data = settings.model_dump()
            data.update(self._overrides)
            settings = ApprovalSettings.model_validate(data)
        return settings, Rules.from_settings(settings)

    def get(self) -> tuple[ApprovalSettings, Rules]:
        """The settings and rules in force."""
        return self._settings, self._rules

    def reload(self) -> tuple[ApprovalSettings, Rules]:
        """Read the policy again and put it in force; log at warning what loosened."""
        with self._lock:
            old = self._settings
            self._settings, self._rules = self._load()
            for change in loosened(old, self._settings):
                log.warning("approval policy loosened on reload: %s", change)
            return self._settings, self._rules


_STRICTNESS = {"off": 0, "smart": 1, "manual": 2}


def loosened(old: ApprovalSettings, new: ApprovalSettings) -> list[str]:
    """What ``new`` allows that ``old`` did not, one line each (empty: nothing loosened)."""
    changes = []
    if _STRICTNESS[new.mode] < _STRICTNESS[old.mode]:
        changes.append(f"mode {old.mode} -> {new.mode}")
    added = [e for e in new.command_allowlist if e not in old.command_allowlist]
    if added:
        changes.append(f"command_allowlist gained {added}")
    dropped = [e for e in old.command_denylist if e not in new.command_denylist]
    if dropped:
        changes.append(f"command_denylist lost {dropped}")
    unprotected = [p for p in old.protected_paths if p not in new.protected_paths]
    if unprotected:
        changes.append(f"protected_paths lost {unprotected}")
    for backend, policy in new.backend_policy.items():
        before = old.backend_policy.get(backend, "check")
        if policy != before and (policy == "allow" or isinstance(policy, list)):
            changes.append(f"backend_policy[{backend}] {before!r} -> {policy!r}")
    if new.judge != old.judge and new.mode == "smart":
        changes.append("the smart-mode judge changed")
    if new.max_command_bytes > old.max_command_bytes:
        changes.append(f"max_command_bytes {old.max_command_bytes} -> {new.max_command_bytes}")
    return changes
