"""The worker side: what runs inside ``sbx worker``.

* :mod:`~worker.service.runner` -- starts a worker: app, tasks, background threads.
* :mod:`~worker.service.tasks` -- the Celery tasks (claim, heartbeat, deliver).
* :mod:`~worker.service.boundary` -- where errors become tool results.
* :mod:`~worker.service.calls`, :mod:`~worker.service.approvals`,
  :mod:`~worker.service.receipt_ops` -- what each task does.
* :mod:`~worker.service.runtime` -- the worker's long-lived collaborators.
* :mod:`~worker.service.processes`, :mod:`~worker.service.forwarding` -- background
  processes and actions forwarded to the worker holding them.
* :mod:`~worker.service.heartbeat`, :mod:`~worker.service.reaper` -- liveness.
* :mod:`~worker.service.mcp` -- configured MCP servers wired into the tool registry.
* :mod:`~worker.service.operations` -- what operators run a worker with:
  :mod:`~worker.service.metrics` (with :mod:`~worker.service.metrics_hooks` and
  :mod:`~worker.service.call_observers`), :mod:`~worker.service.health`,
  :mod:`~worker.service.events`, :mod:`~worker.service.log_format`.

Never imports :mod:`worker.client`.
"""
