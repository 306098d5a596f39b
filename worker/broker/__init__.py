"""Reaching the broker and the ledger: shared by clients and workers.

* :mod:`~worker.broker.connection` -- where the broker and the ledger are.
* :mod:`~worker.broker.embedded` -- the embedded Redis under ``SBX_HOME``.
* :mod:`~worker.broker.app` -- the Celery app with sbx's transport settings.
* :mod:`~worker.broker.sender` -- sending a task and collecting its answer.
"""
