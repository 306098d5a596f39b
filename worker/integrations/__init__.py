"""Where agent platforms plug into sbx, built on the client alone.

* :mod:`worker.integrations.session_calls` -- a session's calls from ``async`` code:
  cancellable, a foreground call's output as it comes, files in and out;
* :mod:`worker.integrations.inspect_provider` -- the ``sbx`` sandbox environment
  of inspect_ai (``pip install 'sbx[inspect]'``).

Nothing here is imported by :mod:`worker.client`, and nothing here imports the
worker side (an import-linter contract in pyproject.toml checks it).
"""
