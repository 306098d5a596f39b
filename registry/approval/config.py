"""Approval configuration: loaded once, cached, reloaded only when the file changes.

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

:meth:`ApprovalConfigSource.get` costs one ``stat`` when nothing changed; the
file is parsed again only when its (mtime, size, inode) changes or on
:meth:`~ApprovalConfigSource.reload`. A file that fails to parse on the first
load raises :class:`ApprovalConfigError`; later, the last good configuration
stays in force (a half-written edit must not drop the deny rules).
:meth:`~ApprovalConfigSource.add_allowlist_entries` appends atomically under a
file lock (temp file, fsync, rename, directory fsync; mode 0600).
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import logging
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
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
    """Cached view of the approval configuration file (see module docstring).

    ``overrides`` (e.g. ``{"mode": "off"}`` from worker settings) replace
    ``approvals.*`` values from the file. ``path=None`` means no file: defaults
    plus overrides, and "always" approvals are kept in memory only.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None, *, overrides: dict[str, Any] | None = None
    ) -> None:
        self.path = Path(path) if path is not None else None
        self._overrides = dict(overrides or {})
        self._lock = threading.Lock()
        self._signature: tuple[int, int, int] | None = None
        self._memory_allow: list[str] = []
        self._settings, self._rules = self._load(first=True)

    def _stat(self) -> tuple[int, int, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        except OSError:
            # Unreadable for now (permissions, I/O): keep the configuration in force.
            return self._signature
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _load(self, first: bool = False) -> tuple[ApprovalSettings, Rules]:
        signature = self._stat()
        doc: Any = {}
        if signature is not None and self.path is not None:
            try:
                doc = yaml.safe_load(self.path.read_text(encoding="utf-8"))
                settings = ApprovalSettings.from_document(doc)
            except (OSError, yaml.YAMLError, ApprovalConfigError) as exc:
                if first:
                    raise ApprovalConfigError(f"cannot load {self.path}: {exc}") from exc
                log.warning(
                    "approval config %s unreadable, keeping previous: %s",
                    self.path,
                    type(exc).__name__,
                )
                self._signature = signature
                return self._settings, self._rules
        else:
            settings = ApprovalSettings()
        if self._overrides or self._memory_allow:
            data = settings.model_dump()
            data.update(self._overrides)
            data["command_allowlist"] = [*data["command_allowlist"], *self._memory_allow]
            settings = ApprovalSettings.model_validate(data)
        self._signature = signature
        return settings, Rules.from_settings(settings)

    def get(self) -> tuple[ApprovalSettings, Rules]:
        """Current settings and rules; re-parses only if the file changed."""
        if self._stat() != self._signature:
            with self._lock:
                if self._stat() != self._signature:
                    self._settings, self._rules = self._load()
        return self._settings, self._rules

    def reload(self) -> tuple[ApprovalSettings, Rules]:
        """Re-read the file now, whatever its mtime says."""
        with self._lock:
            self._settings, self._rules = self._load()
            return self._settings, self._rules

    def add_allowlist_entries(self, entries: Iterable[str]) -> None:
        """Append ``entries`` to ``command_allowlist`` durably (or in memory without a file)."""
        new = [e for e in entries if e]
        if not new:
            return
        with self._lock:
            if self.path is None:
                self._memory_allow.extend(e for e in new if e not in self._memory_allow)
            else:
                _append_allowlist(self.path, new)
            self._settings, self._rules = self._load()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock shared by every worker that edits ``path``."""
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _append_allowlist(path: Path, entries: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(path):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            doc = {}
        if not isinstance(doc, dict):
            raise ApprovalConfigError(f"{path}: config root must be a mapping")
        current = doc.get("command_allowlist") or []
        if not isinstance(current, list):
            raise ApprovalConfigError(f"{path}: command_allowlist must be a list")
        current.extend(e for e in entries if e not in current)
        doc["command_allowlist"] = current
        atomic_write(path, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, mode 0600.

    Temp file in the same directory, fsync, rename, then fsync of the directory.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
