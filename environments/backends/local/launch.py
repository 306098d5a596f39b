"""Starting bubblewrap itself: a binary the worker chose, an environment the model cannot touch.

``bwrap`` runs on the host, as the worker's user and outside the jail it is about
to make; only its child is jailed. Whatever reaches bubblewrap's own ``execve``
is therefore trusted with the host:

* its binary is resolved once, on the worker's own ``PATH``
  (:func:`bwrap_binary`), never on the session's: a session exports what it likes
  (``PATH=$PWD/evil:$PATH``), and a ``bwrap`` looked up there would be the model's
  program running unjailed;
* it starts with an empty environment (:data:`LAUNCH_ENV`): the session's
  variables would reach the host's dynamic loader (``LD_PRELOAD``,
  ``LD_LIBRARY_PATH``, ``GCONV_PATH``, ...) before bubblewrap's first line. The
  jail's environment travels as options instead (:func:`environment_options`,
  ``--clearenv`` then ``--setenv``), which bubblewrap applies to itself only
  after it has started, for the command it runs in the jail.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from environments.errors import BackendUnavailable

LAUNCH_ENV: dict[str, str] = {}
"""The environment bubblewrap starts with: none."""


def bwrap_binary(name: str) -> str:
    """The absolute path of bubblewrap ``name`` (a path, or a name on the worker's
    ``PATH``). Raises :class:`BackendUnavailable` when there is none."""
    found = shutil.which(name, path=os.environ.get("PATH", os.defpath))
    if found is None:
        raise BackendUnavailable(
            f"bubblewrap ({name}) is not installed (apt-get install bubblewrap)"
        )
    return os.path.abspath(found)


def environment_options(env: Mapping[str, str]) -> list[str]:
    """bubblewrap options giving the jailed command exactly ``env``.

    Raises ``ValueError`` for a NUL byte in a name or value, or a name that is empty or
    holds ``=``: the options travel NUL-separated, so a NUL would start an option of
    its own choosing (``--bind / /x``), and no environment can hold one anyway.
    """
    options = ["--clearenv"]
    for name, value in env.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise ValueError(f"not an environment variable: {name!r}")
        options += ["--setenv", name, value]
    return options
