"""What may be deleted without asking: regenerable build/cache output and temporary paths.

Contract: every function takes one path argument (after expansion; ``~`` and
unknown ``$VARS`` still literal) and answers conservatively: a path is
scratch only when its own spelling shows it (``node_modules``, ``dist/``,
``/tmp/x``, ``~/.cache/pip``), never a parent directory, ``..``, an
everything-glob of a directory that is not itself scratch, or a
regenerable name directly under ``/`` or a system directory.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re

from registry.approval.rules.paths import is_everything_glob, is_system_path
from registry.approval.shell.args import word_set

__all__ = ["is_artifact_pattern", "is_regenerable", "is_scratch", "is_temp_path"]

# Directories any build or test run recreates.
REGENERABLE = word_set(
    """
    node_modules build dist out-tsc target .pytest_cache __pycache__ .mypy_cache .ruff_cache
    .tox .nox .venv venv .next .nuxt .turbo .parcel-cache .cache .svelte-kit .angular
    coverage htmlcov .coverage .eggs .gradle .hypothesis .benchmarks bower_components
    _build .dart_tool .expo .vite .webpack .esbuild .pnpm-store .yarn-cache .sass-cache
    .docusaurus .vercel .serverless .aws-sam cdk.out .stack-work dist-newstyle obj bin-debug
    """
)
_REGENERABLE_GLOBS = ("*.egg-info", "cmake-build-*", ".coverage.*", "*.pyc", "*.pyo")
# Names or patterns of files every build leaves behind (find -name ... -delete).
ARTIFACT_PATTERNS = word_set(
    """
    *.pyc *.pyo *.o *.obj *.class *~ *.swp *.swo *.orig *.rej .DS_Store Thumbs.db
    __pycache__ *.egg-info .pytest_cache .mypy_cache .ruff_cache *.gcda *.gcno .coverage
    *.coverage *.pyd.tmp node_modules *.tsbuildinfo *.log.tmp
    """
)
_TEMP_ROOTS = ("/tmp/", "/var/tmp/", "/dev/shm/", "/private/tmp/", "/private/var/folders/")
_TEMP_VARS_RE = re.compile(r"^(?:\$TMPDIR|\$\{TMPDIR(?::?[-=][^}]*)?\}|\$RUNNER_TEMP)/")
_HOME_CACHE_RE = re.compile(r"^(?:~|\$HOME|\$\{HOME\})/(?:\.cache|\.npm/_cacache|Library/Caches)/")
_GLOB_CHARS = frozenset("*?[")


def _components(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


def is_temp_path(path: str) -> bool:
    """``/tmp/<something>`` (not ``/tmp`` itself or everything in it), ``$TMPDIR/x``, ..."""
    if "\x1f" in path:
        return False
    norm = posixpath.normpath(path) + ("/" if path.endswith("/") else "")
    if ".." in path.split("/"):
        return False
    for root in _TEMP_ROOTS:
        if norm.startswith(root):
            rest = _components(norm[len(root) :])
            return bool(rest) and not (len(rest) == 1 and is_everything_glob(rest[0]))
    m = _TEMP_VARS_RE.match(path)
    if m:
        rest = _components(path[m.end() :])
        return bool(rest) and not (len(rest) == 1 and is_everything_glob(rest[0]))
    return False


def is_regenerable(path: str) -> bool:
    """A build/cache directory (or its contents) that a build or install recreates."""
    parts = _components(path)
    if not parts or ".." in parts:
        return False
    if _HOME_CACHE_RE.match(path):
        return len(parts) >= 2
    if parts[0] in ("~", "$HOME", "${HOME}", "$PWD", "${PWD}"):
        parts = parts[1:]
    while parts and is_everything_glob(parts[-1]):
        parts.pop()  # "build/*": the contents of a regenerable directory
    if not parts:
        return False
    if any(c in _GLOB_CHARS for c in parts[-1]):
        # Only globs that themselves name build output ("*.egg-info", "*.pyc").
        return parts[-1] in _REGENERABLE_GLOBS or parts[-1] in ARTIFACT_PATTERNS
    # The first regenerable component: everything at or under it is regenerable.
    k = next((i for i, p in enumerate(parts) if _regenerable_name(p)), -1)
    if k < 0:
        return False
    parent = "/" + "/".join(parts[:k])
    return not path.startswith("/") or (k >= 1 and not is_system_path(parent))


def _regenerable_name(name: str) -> bool:
    return name in REGENERABLE or any(fnmatch.fnmatchcase(name, g) for g in _REGENERABLE_GLOBS)


def is_scratch(path: str) -> bool:
    """Deleting ``path`` loses nothing a build, an install or a reboot would not recreate.

    ``{}`` counts: it is the placeholder of ``find -exec``/``xargs -I``, whose
    own rules judge what it stands for.
    """
    return path == "{}" or is_regenerable(path) or is_temp_path(path)


def is_artifact_pattern(pattern: str) -> bool:
    """A ``find -name`` pattern or ``rm`` glob that only matches build leftovers (``*.pyc``)."""
    base = pattern.rsplit("/", 1)[-1]
    return base in ARTIFACT_PATTERNS or (base in REGENERABLE and not base.startswith("*"))
