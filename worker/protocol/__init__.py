"""The wire contract between platforms' clients and workers.

* :mod:`~worker.protocol.tasks` -- task names and queue names.
* :mod:`~worker.protocol.messages` -- call, approval messages and tool results.
* :mod:`~worker.protocol.process_messages` -- process, receipt op messages and results.
* :mod:`~worker.protocol.ledger` -- the Redis keys and scripts of sbx's own state:
  claims, heartbeats, mailboxes, cancellations, process routes.

Imported by both sides; imports nothing of the worker side, the registry, the
process table or any backend.
"""
