"""Sandbox backends behind one contract.

* :mod:`environments.base` -- the :class:`~environments.base.Environment` contract.
* :mod:`environments.registry` -- backend names to classes (built-ins by module path,
  plugins through the ``sbx.environments`` entry point group).
* :mod:`environments.pool` -- the sandboxes of a worker, one per (session, backend).
* :mod:`environments.shell` -- the session shell every shell backend drives.
* :mod:`environments.backends` -- one module (or folder) per backend.
* :mod:`environments.conformance` -- the checks every backend passes.
* :mod:`environments.errors` -- sbx's error root and the backends' errors.

This package imports none of ``worker``, ``registry`` or ``process_registry``;
importing it imports nothing else, so that ``environments.errors`` stays cheap.
"""
