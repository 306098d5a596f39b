"""Reading ``$SBX_HOME/config.yaml``: the document, or one line saying why it cannot be used.

Every problem is a :class:`SettingsError` naming the file (and the line or key), never
the offending text: it may be a secret. A key that names no setting and no backend is
a problem too: a typo'd key silently ignored would leave its default in force.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from environments.errors import Invalid


class SettingsError(Invalid):
    """The configuration (``SBX_*`` or config.yaml) is invalid; one line, values never shown."""


def read_config_document(path: Path) -> dict[str, Any]:
    """The mapping config.yaml at ``path`` holds; ``{}`` when there is no such file.

    Raises :class:`SettingsError` when it exists but cannot be read (a directory, no
    permission, not UTF-8), is not YAML, or is not a mapping.
    """
    if not path.exists() and not path.is_symlink():
        return {}
    if not path.is_file():
        raise SettingsError(f"{path} is not a regular file: make it one, or remove it")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SettingsError(f"{path} is not UTF-8 text") from None
    except OSError as exc:
        raise SettingsError(f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        loaded = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        # Say where, never what: the offending text may be a secret.
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise SettingsError(f"{path} is not valid YAML{where}") from None
    if not isinstance(loaded, dict):
        raise SettingsError(f"{path} must hold a mapping of settings")
    return loaded


def check_known_keys(path: Path, loaded: dict[str, Any], settings: Collection[str]) -> None:
    """:class:`SettingsError` for the first top-level key of ``loaded`` that is not one of
    ``settings`` and does not hold a mapping (a backend's settings, whose names only the
    worker side knows: :func:`unknown_backend_sections` there)."""
    for key, value in loaded.items():
        if isinstance(key, str) and (key in settings or isinstance(value, dict)):
            continue
        close = difflib.get_close_matches(str(key), sorted(settings), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SettingsError(
            f"{path}: unknown key {str(key)!r}{hint}: config.yaml takes the settings "
            "of docs/configuration.md and mappings named after backends"
        )


def unknown_backend_sections(path: Path, sections: Collection[str], known: Collection[str]
                             ) -> None:  # fmt: skip
    """:class:`SettingsError` for the first of config.yaml's backend ``sections`` (its
    top-level mappings that name no setting) that names none of the ``known`` backends."""
    for key in sections:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SettingsError(
                f"{path}: unknown key {key!r}{hint}: neither a setting nor a backend's name"
            )
